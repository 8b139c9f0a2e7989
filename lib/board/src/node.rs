//! What every node parser shares: a node's `status`, its name without the unit address,
//! string and `reg` helpers.

use alloc::string::{String, ToString};
use alloc::vec::Vec;

use crate::error::{bad_prop, missing_prop, BoardError};
use crate::tree::{str_value, Tree};
use crate::Region;

/// A node's `status` property.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// No `status`, or `"okay"` / `"ok"`.
    Okay,
    /// `"disabled"`.
    Disabled,
    /// Anything else (`"reserved"`, `"fail"`, `"fail-sss"`, ...).
    Other(String),
}

impl Status {
    /// Is the device usable (`Okay`)?
    pub fn is_okay(&self) -> bool {
        matches!(self, Status::Okay)
    }
}

pub(crate) fn strings(v: Option<Vec<&str>>) -> Vec<String> {
    v.unwrap_or_default().into_iter().map(String::from).collect()
}

pub(crate) fn status(t: &Tree, i: usize) -> Status {
    status_of(t.prop(i, "status"))
}

/// A `status` value: absent, malformed (not one string), `"okay"` or `"ok"` is [`Status::Okay`].
pub(crate) fn status_of(v: Option<&[u8]>) -> Status {
    match v.map(str_value) {
        None | Some(Err(_)) | Some(Ok("okay" | "ok")) => Status::Okay,
        Some(Ok("disabled")) => Status::Disabled,
        Some(Ok(other)) => Status::Other(other.to_string()),
    }
}

/// Whether node `i` is there: no `status`, or `"okay"` / `"ok"`. Any other status (`"disabled"`,
/// `"fail"`, `"fail-sss"`, `"reserved"`) says the device is not usable by this OS: Linux's
/// `of_device_is_available`.
pub(crate) fn available(t: &Tree, i: usize) -> bool {
    status(t, i).is_okay()
}

pub(crate) fn base_name(name: &str) -> &str {
    name.split('@').next().unwrap_or(name)
}

pub(crate) fn prop_is(t: &Tree, i: usize, prop: &str, value: &str) -> bool {
    t.prop(i, prop).is_some_and(|v| v.strip_suffix(&[0]) == Some(value.as_bytes()))
}

pub(crate) fn regions(t: &Tree, i: usize, pairs: Vec<(u64, u64)>) -> Result<Vec<Region>, BoardError> {
    pair_regions(pairs).map_err(|why| bad_prop(t.path(i), "reg", why))
}

/// (address, size) pairs as regions; a range that wraps past 2^64 is an error.
pub(crate) fn pair_regions(pairs: Vec<(u64, u64)>) -> Result<Vec<Region>, &'static str> {
    pairs.into_iter().map(|(b, s)| b.checked_add(s).map(|_| Region::new(b, s)).ok_or("range wraps past 2^64")).collect()
}

/// `reg` translated to CPU addresses; missing or unreachable is an error.
pub(crate) fn required_reg(t: &Tree, i: usize) -> Result<Vec<Region>, BoardError> {
    if !t.has_prop(i, "reg") {
        return Err(missing_prop(t.path(i), "reg"));
    }
    let pairs = t
        .reg_phys(i)?
        .ok_or_else(|| bad_prop(t.path(i), "reg", "not reachable from the CPU: a parent bus lacks matching ranges"))?;
    let regs = regions(t, i, pairs)?;
    if regs.is_empty() {
        return Err(bad_prop(t.path(i), "reg", "empty"));
    }
    Ok(regs)
}
