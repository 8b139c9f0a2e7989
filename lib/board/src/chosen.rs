//! `/chosen`: the command line and the initrd (the console it names is [`crate::console`]'s).

use alloc::string::String;

use crate::error::{bad_prop, missing_prop, BoardError};
use crate::tree::Tree;
use crate::Region;

pub(crate) fn parse_chosen(t: &Tree, c: usize) -> Result<(Option<String>, Option<Region>), BoardError> {
    let bootargs = t.prop_str(c, "bootargs")?.map(String::from);
    let start = t.prop_u32_or_u64(c, "linux,initrd-start")?;
    let end = t.prop_u32_or_u64(c, "linux,initrd-end")?;
    let initrd = match (start, end) {
        (None, None) => None,
        (Some(_), None) => return Err(missing_prop(t.path(c), "linux,initrd-end")),
        (None, Some(_)) => return Err(missing_prop(t.path(c), "linux,initrd-start")),
        (Some(s), Some(e)) if e < s => {
            return Err(bad_prop(t.path(c), "linux,initrd-end", "smaller than linux,initrd-start"))
        }
        (Some(s), Some(e)) => Some(Region::new(s, e - s)),
    };
    Ok((bootargs, initrd))
}
