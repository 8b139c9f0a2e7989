/*
 * insncount: a QEMU TCG plugin that counts the TLBI, DSB and ISB instructions the guest
 * executes, per vCPU and per exception level, independently of the project's own counters.
 *
 * No QEMU package installs the plugin header, so the few functions used here are declared
 * below from the API's documented signatures, for the API version given at build time:
 * `-DINSNCOUNT_API=N`, which the xtask picks from the QEMU binary's version (one table,
 * `xtask/src/plugin.rs` `api_for`). Built by `cargo xtask` with the host C compiler
 * (`cc -shared -fPIC -nostdlib`), loaded with `-plugin PATH,out=FILE[,el2=LO-HI...]`.
 *
 * QEMU loads a plugin only if the version it exports lies in QEMU's [min, cur] (7.2: [0, 1];
 * 9.0: [2, 2]; 9.1: [2, 3]; 9.2 and 10.0: [2, 4]; 10.1: [2, 5]) and otherwise refuses it with a
 * message naming both. Of the functions used here only `qemu_plugin_insn_data` changed in
 * those versions: up to API 2 it returns a pointer to the instruction's bytes, from API 3 on
 * it copies them into a caller's buffer and returns how many it copied. (API 2 removed
 * `qemu_plugin_n_vcpus` and the non-per-vCPU inline ops, unused here; APIs 4 and 5 only
 * added functions.) The call is by the declared signature, so a library built for the wrong
 * API would read garbage: each build declares exactly its own API, and an instruction whose
 * four bytes cannot be read is counted (`unread` in the end line), which the reader refuses.
 *
 * Exception level: API 1 gives no register access (APIs 2 on read registers, QEMU 7.2 cannot),
 * so on every QEMU alike the level is taken from where the instruction lives: code in an
 * `el2=LO-HI` range (the hypervisor's image, which QEMU loads at a fixed address and which runs
 * identity mapped) is EL2, code in an `el0=LO-HI` range (the xtask passes where user programs
 * live, `xtask/src/plugin.rs` el0_code) is EL0, everything else EL1.
 *
 * The hypervisor may move itself at boot (to the top of RAM, so the guest's RAM has no hole).
 * With `el2mark=OFF` the first `el2=` range moves with it: the hypervisor executes `HINT #125`
 * (a NOP) at image offset OFF first thing in Rust on every boot, and a translation of that hint
 * at address A puts the range at [A - OFF, A - OFF + its size). Code the moved image runs before
 * the mark (the relocation loop of `__rt_entry`, outside any window) still counts as EL1.
 *
 * Windows: `HINT #126` (an unallocated hint, a NOP on every CPU) opens a window and
 * `HINT #127` closes it; each snapshots the counts of every vCPU, so a window's counts are
 * those of all vCPUs between the two markers (the markers themselves are not counted).
 *
 * Every instruction is counted too, per translation block executed (`insns`: exact except for a
 * block an exception leaves early), per vCPU: under -icount QEMU's INST_RETIRED is one global
 * count, so the instructions of vCPUs a broadcast TLBI woke are in it; these lines let a reader
 * subtract them.
 *
 * Output (at exit, one JSON object per line, to FILE):
 *   {"kind":"insn_count","scope":"total","vcpu":V,"el":E,"tlbi":N,"dsb":N,"isb":N,"insns":N}
 *   {"kind":"insn_count","scope":"window","window":W,"vcpu":V,"el":E,"tlbi":N,...}
 *   {"kind":"insn_count_end","windows":N,"dropped_windows":N,"unclosed":0|1,"el2_moves":N,
 *    "el2_at":A,"api":N,"unread":N}
 * Lines whose counts are all zero are left out.
 */
/*
 * No header at all, not even libc's: a machine with a C compiler but without libc6-dev builds
 * this too (`-nostdlib`). The few C library functions used are declared here and resolved from
 * QEMU's own process when it loads the plugin.
 */
typedef __UINT32_TYPE__ uint32_t;
typedef __UINT64_TYPE__ uint64_t;
typedef __UINTPTR_TYPE__ uintptr_t;
typedef __SIZE_TYPE__ size_t;
typedef struct FILE FILE;
extern FILE *stderr;
FILE *fopen(const char *path, const char *mode);
int fclose(FILE *f);
int fprintf(FILE *f, const char *fmt, ...);
int snprintf(char *s, size_t n, const char *fmt, ...);
int strncmp(const char *a, const char *b, size_t n);
unsigned long long strtoull(const char *s, char **end, int base);
#define memcpy __builtin_memcpy

/* ---- the QEMU plugin API, version INSNCOUNT_API (1 and 2: QEMU 7.2 to 9.0; 3: 9.1 on) ---- */
#if !defined(INSNCOUNT_API) || INSNCOUNT_API < 1 || INSNCOUNT_API > 3
#error "build with -DINSNCOUNT_API=1, 2 or 3 (xtask/src/plugin.rs picks it from QEMU's version)"
#endif
typedef uint64_t qemu_plugin_id_t;
typedef struct qemu_info_t qemu_info_t; /* only passed through */
struct qemu_plugin_tb;
struct qemu_plugin_insn;
enum qemu_plugin_cb_flags { QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_CB_R_REGS, QEMU_PLUGIN_CB_RW_REGS };
typedef void (*qemu_plugin_vcpu_udata_cb_t)(unsigned int vcpu_index, void *userdata);
typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void *userdata);
void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t idx);
#if INSNCOUNT_API >= 3
size_t qemu_plugin_insn_data(const struct qemu_plugin_insn *insn, void *dest, size_t len);
#else
const void *qemu_plugin_insn_data(const struct qemu_plugin_insn *insn);
#endif
size_t qemu_plugin_insn_size(const struct qemu_plugin_insn *insn);
uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn *insn);
void qemu_plugin_register_vcpu_insn_exec_cb(struct qemu_plugin_insn *insn, qemu_plugin_vcpu_udata_cb_t cb,
                                            enum qemu_plugin_cb_flags flags, void *userdata);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb, void *userdata);
uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *tb);
void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb *tb, qemu_plugin_vcpu_udata_cb_t cb,
                                          enum qemu_plugin_cb_flags flags, void *userdata);
#define QEMU_PLUGIN_EXPORT __attribute__((visibility("default")))
QEMU_PLUGIN_EXPORT int qemu_plugin_version = INSNCOUNT_API;
/* ---- end of the API ---- */

enum { K_TLBI, K_DSB, K_ISB, K_INSNS, KINDS };
enum { MARK_OPEN = 8, MARK_CLOSE = 9, MARK_HOME = 10 };
#define MAX_VCPUS 64
#define LEVELS 3
#define MAX_WINDOWS 256
#define MAX_RANGES 8

typedef struct {
    uint64_t c[MAX_VCPUS][LEVELS][KINDS];
} counts_t;

static counts_t live;
static counts_t opened;
static counts_t windows[MAX_WINDOWS];
static int n_windows, window_open, dropped_windows;
static char out_path[4096];
static struct {
    uint64_t lo, hi;
    int el;
} ranges[MAX_RANGES];
static int n_ranges;

/* What an instruction word is: a kind, a marker, or -1. */
static int classify(uint32_t w)
{
    if ((w & 0xfff8f000u) == 0xd5088000u) /* SYS with CRn = 8, L = 0: TLBI (every form) */
        return K_TLBI;
    if ((w & 0xfffff0ffu) == 0xd503309fu) { /* DSB <option> (CRm 0 and 4 are SSBB/PSSBB) */
        uint32_t crm = (w >> 8) & 0xf;
        return (crm == 0 || crm == 4) ? -1 : K_DSB;
    }
    if ((w & 0xfffff0ffu) == 0xd50330dfu) /* ISB */
        return K_ISB;
    if (w == (0xd503201fu | (126u << 5)))
        return MARK_OPEN;
    if (w == (0xd503201fu | (125u << 5)))
        return MARK_HOME;
    if (w == (0xd503201fu | (127u << 5)))
        return MARK_CLOSE;
    return -1;
}

/* `el2mark=OFF`: the image offset of the hypervisor's HINT #125 (0: no moving range). */
static uint64_t el2_mark;
static int el2_moves;
static uint64_t el2_moved_to;

/* A translated HINT #125 at `va`: the hypervisor runs at va - el2_mark now. Translation happens
 * on one vCPU at a time at that point of boot (the hypervisor moves before it starts others). */
static void el2_home_seen(uint64_t va)
{
    if (!el2_mark || va < el2_mark || ((va - el2_mark) & 0xfff) || n_ranges == 0 || ranges[0].el != 2)
        return;
    uint64_t base = va - el2_mark;
    if (base == ranges[0].lo)
        return;
    ranges[0].hi = base + (ranges[0].hi - ranges[0].lo);
    ranges[0].lo = base;
    el2_moves++;
    el2_moved_to = base;
}

static int level_of(uint64_t va)
{
    for (int i = 0; i < n_ranges; i++)
        if (va >= ranges[i].lo && va < ranges[i].hi)
            return ranges[i].el;
    return 1;
}

static void snapshot(counts_t *dst)
{
    for (unsigned v = 0; v < MAX_VCPUS; v++)
        for (int e = 0; e < LEVELS; e++)
            for (int k = 0; k < KINDS; k++)
                dst->c[v][e][k] = __atomic_load_n(&live.c[v][e][k], __ATOMIC_RELAXED);
}

static void on_exec(unsigned int vcpu, void *udata)
{
    uintptr_t u = (uintptr_t)udata;
    int kind = u & 0xff, el = (u >> 8) & 0xff;
    if (vcpu >= MAX_VCPUS)
        return;
    if (kind < KINDS) {
        __atomic_fetch_add(&live.c[vcpu][el][kind], 1, __ATOMIC_RELAXED);
    } else if (kind == MARK_OPEN) {
        snapshot(&opened);
        window_open = 1;
    } else if (kind == MARK_CLOSE && window_open) {
        window_open = 0;
        if (n_windows >= MAX_WINDOWS) {
            dropped_windows++;
            return;
        }
        counts_t now;
        snapshot(&now);
        for (unsigned v = 0; v < MAX_VCPUS; v++)
            for (int e = 0; e < LEVELS; e++)
                for (int k = 0; k < KINDS; k++)
                    windows[n_windows].c[v][e][k] = now.c[v][e][k] - opened.c[v][e][k];
        n_windows++;
    }
}

/* A translation block ran: udata = its instruction count | EL << 56. */
static void on_tb_exec(unsigned int vcpu, void *udata)
{
    uintptr_t u = (uintptr_t)udata;
    if (vcpu >= MAX_VCPUS)
        return;
    __atomic_fetch_add(&live.c[vcpu][u >> 56][K_INSNS], u & 0xffffffffu, __ATOMIC_RELAXED);
}

/* Instructions whose bytes the API would not give (a library built for another API). */
static uint64_t unread;

/* The 4-byte instruction word of `insn`: 0 if the API did not give all four bytes. */
static int insn_word(const struct qemu_plugin_insn *insn, uint32_t *w)
{
#if INSNCOUNT_API >= 3
    return qemu_plugin_insn_data(insn, w, sizeof *w) == sizeof *w;
#else
    const void *p = qemu_plugin_insn_data(insn);
    if (!p)
        return 0;
    memcpy(w, p, sizeof *w);
    return 1;
#endif
}

static void on_tb(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    (void)id;
    size_t n = qemu_plugin_tb_n_insns(tb);
    uintptr_t tb_udata = (uintptr_t)n | ((uintptr_t)level_of(qemu_plugin_tb_vaddr(tb)) << 56);
    qemu_plugin_register_vcpu_tb_exec_cb(tb, on_tb_exec, QEMU_PLUGIN_CB_NO_REGS, (void *)tb_udata);
    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        if (qemu_plugin_insn_size(insn) != 4)
            continue;
        uint32_t w;
        if (!insn_word(insn, &w)) {
            __atomic_fetch_add(&unread, 1, __ATOMIC_RELAXED);
            continue;
        }
        int kind = classify(w);
        if (kind == MARK_HOME) {
            el2_home_seen(qemu_plugin_insn_vaddr(insn));
            continue;
        }
        if (kind < 0)
            continue;
        uintptr_t u = (uintptr_t)kind | ((uintptr_t)level_of(qemu_plugin_insn_vaddr(insn)) << 8);
        qemu_plugin_register_vcpu_insn_exec_cb(insn, on_exec, QEMU_PLUGIN_CB_NO_REGS, (void *)u);
    }
}

static void print_counts(FILE *f, const char *scope, int window, const counts_t *c)
{
    /* Every vCPU: one that ran anything has a non-zero count (instructions at least). */
    for (unsigned v = 0; v < MAX_VCPUS; v++)
        for (int e = 0; e < LEVELS; e++) {
            const uint64_t *k = c->c[v][e];
            if (!k[K_TLBI] && !k[K_DSB] && !k[K_ISB] && !k[K_INSNS])
                continue;
            fprintf(f, "{\"kind\":\"insn_count\",\"scope\":\"%s\",", scope);
            if (window >= 0)
                fprintf(f, "\"window\":%d,", window);
            fprintf(f, "\"vcpu\":%u,\"el\":%d,\"tlbi\":%llu,\"dsb\":%llu,\"isb\":%llu,\"insns\":%llu}\n", v, e,
                    (unsigned long long)k[K_TLBI], (unsigned long long)k[K_DSB], (unsigned long long)k[K_ISB],
                    (unsigned long long)k[K_INSNS]);
        }
}

static void on_exit_cb(qemu_plugin_id_t id, void *p)
{
    (void)id;
    (void)p;
    FILE *f = fopen(out_path, "w");
    if (!f) {
        fprintf(stderr, "insncount: cannot write %s\n", out_path);
        return;
    }
    counts_t total;
    snapshot(&total);
    print_counts(f, "total", -1, &total);
    for (int w = 0; w < n_windows; w++)
        print_counts(f, "window", w, &windows[w]);
    fprintf(f,
            "{\"kind\":\"insn_count_end\",\"windows\":%d,\"dropped_windows\":%d,\"unclosed\":%d,"
            "\"el2_moves\":%d,\"el2_at\":%llu,\"api\":%d,\"unread\":%llu}\n",
            n_windows, dropped_windows, window_open, el2_moves, (unsigned long long)(n_ranges ? ranges[0].lo : 0),
            qemu_plugin_version, (unsigned long long)unread);
    fclose(f);
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv)
{
    (void)info;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strncmp(a, "out=", 4)) {
            snprintf(out_path, sizeof out_path, "%s", a + 4);
        } else if (!strncmp(a, "el2mark=", 8)) {
            char *end;
            el2_mark = strtoull(a + 8, &end, 0);
            if (*end || !el2_mark) {
                fprintf(stderr, "insncount: bad %s (want el2mark=OFFSET, non-zero)\n", a);
                return -1;
            }
        } else if ((!strncmp(a, "el2=", 4) || !strncmp(a, "el0=", 4)) && n_ranges < MAX_RANGES) {
            char *end;
            uint64_t lo = strtoull(a + 4, &end, 0), hi;
            if (*end != '-') {
                fprintf(stderr, "insncount: bad range %s (want elN=LO-HI)\n", a);
                return -1;
            }
            hi = strtoull(end + 1, &end, 0);
            if (*end || hi <= lo) {
                fprintf(stderr, "insncount: bad range %s\n", a);
                return -1;
            }
            ranges[n_ranges].lo = lo;
            ranges[n_ranges].hi = hi;
            ranges[n_ranges].el = a[2] - '0';
            n_ranges++;
        } else {
            fprintf(stderr, "insncount: unknown argument %s\n", a);
            return -1;
        }
    }
    if (!out_path[0]) {
        fprintf(stderr, "insncount: out=FILE is required\n");
        return -1;
    }
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_tb);
    qemu_plugin_register_atexit_cb(id, on_exit_cb, (void *)0);
    return 0;
}
