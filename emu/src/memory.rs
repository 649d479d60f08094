//! Device memory: fake device addresses backed by guarded host mappings.
//!
//! Each allocation gets its own mapping `[guard page][slack | data | tail][guard page]`
//! with the data pushed against the upper guard page, so a kernel running off
//! the end faults at once (the fault handler turns that into a launch error).
//! The slack and the tail (the bytes up to the next 256-byte boundary, as on a
//! GPU) are filled with a pattern and checked after every launch, which
//! catches small overruns that stay inside the mapping.

use std::cell::RefCell;
use std::ffi::{c_char, c_void};

use crate::state::{CUresult, DEVICE_BASE, DEVICE_SPAN, ILLEGAL_ADDRESS, INVALID_VALUE, OUT_OF_MEMORY, State};

const PAGE: usize = 4096;
const ALIGN: usize = 256;
const REDZONE: u8 = 0xa5;
/// Fresh device memory is garbage on a GPU; all-ones bytes read as NaN in
/// floats, so a kernel reading memory nobody wrote shows up in results.
const FRESH: u8 = 0xff;
const FRESH_FILL_LIMIT: usize = 64 << 20;

pub(crate) struct Alloc {
    pub dev: usize,
    pub size: usize,
    base: *mut u8,
    map_len: usize,
    data: *mut u8,
}

// SAFETY: the mapping is owned by the allocation and only reached through the state lock
// (or by kernels/copies the driver itself runs in stream order).
unsafe impl Send for Alloc {}

fn round_up(x: usize, to: usize) -> usize {
    x.div_ceil(to) * to
}

impl Alloc {
    fn body_len(&self) -> usize {
        self.map_len - 2 * PAGE
    }

    fn redzones(&self) -> [(*mut u8, usize); 2] {
        // SAFETY: both ranges lie inside the read-write body of the mapping.
        unsafe {
            let body = self.base.add(PAGE);
            let front = self.data.offset_from(body) as usize;
            let tail_start = self.data.add(self.size);
            let tail = body.add(self.body_len()).offset_from(tail_start) as usize;
            [(body, front), (tail_start, tail)]
        }
    }

    /// Whether something wrote outside the allocation but inside its mapping.
    pub fn redzone_intact(&self) -> bool {
        self.redzones().iter().all(|&(p, n)| {
            // SAFETY: see `redzones`.
            unsafe { std::slice::from_raw_parts(p, n) }.iter().all(|&b| b == REDZONE)
        })
    }

    fn repaint(&self) {
        for (p, n) in self.redzones() {
            // SAFETY: see `redzones`.
            unsafe { std::ptr::write_bytes(p, REDZONE, n) };
        }
    }

    /// Whether a host address falls in this allocation's mapping (guards included).
    pub fn mapping_contains(&self, host: u64) -> bool {
        let b = self.base as u64;
        host >= b && host < b + self.map_len as u64
    }

    pub fn data_host(&self) -> u64 {
        self.data as u64
    }
}

impl Drop for Alloc {
    fn drop(&mut self) {
        // SAFETY: base/map_len describe a mapping this allocation created and owns.
        unsafe { libc::munmap(self.base as *mut c_void, self.map_len) };
    }
}

pub(crate) fn alloc(st: &mut State, dev: usize, size: usize) -> Result<u64, CUresult> {
    let d = &mut st.devices[dev];
    // Checked: a request near usize::MAX must fail like any other that is
    // too large, not wrap into a small allocation.
    let charged = size
        .checked_next_multiple_of(ALIGN)
        .filter(|&c| c <= isize::MAX as usize - 2 * PAGE)
        .map(|c| c as u64)
        .filter(|&c| d.used.checked_add(c).is_some_and(|total| total <= d.total));
    let Some(charged) = charged else {
        return Err(crate::state::report(
            OUT_OF_MEMORY,
            format!("device {dev}: cannot allocate {size} bytes, {} of {} bytes free", d.total - d.used, d.total),
        ));
    };
    let body = round_up(size, PAGE);
    let map_len = body + 2 * PAGE;
    // SAFETY: a fresh anonymous mapping; NORESERVE so that a large budget costs nothing until touched.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            map_len,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if base == libc::MAP_FAILED {
        return Err(crate::state::report(OUT_OF_MEMORY, format!("host mmap of {map_len} bytes failed")));
    }
    let base = base as *mut u8;
    if body > 0 {
        // SAFETY: the range lies inside the mapping just created.
        let rc = unsafe { libc::mprotect(base.add(PAGE) as *mut c_void, body, libc::PROT_READ | libc::PROT_WRITE) };
        if rc != 0 {
            // SAFETY: unmapping the mapping created above.
            unsafe { libc::munmap(base as *mut c_void, map_len) };
            return Err(crate::state::report(OUT_OF_MEMORY, "host mprotect failed"));
        }
    }
    // SAFETY: body - round_up(size, ALIGN) <= body, so data stays in the mapping and is 256-aligned.
    let data = unsafe { base.add(PAGE + body - round_up(size, ALIGN)) };
    let a = Alloc { dev, size, base, map_len, data };
    a.repaint();
    if size <= FRESH_FILL_LIMIT {
        // SAFETY: [data, data + size) is inside the read-write body.
        unsafe { std::ptr::write_bytes(data, FRESH, size) };
    }
    let addr = d.next_addr;
    // A gap after each allocation: a one-past-the-end pointer never names the next one.
    d.next_addr += charged + ALIGN as u64;
    if d.next_addr >= DEVICE_BASE + (dev as u64 + 1) * DEVICE_SPAN {
        return Err(crate::state::report(OUT_OF_MEMORY, "device address space exhausted"));
    }
    d.used += charged;
    d.allocs.insert(addr, a);
    Ok(addr)
}

pub(crate) fn free(st: &mut State, addr: u64) -> Result<(), CUresult> {
    for d in st.devices.iter_mut() {
        if let Some(a) = d.allocs.remove(&addr) {
            d.used -= round_up(a.size, ALIGN) as u64;
            return Ok(());
        }
    }
    Err(crate::state::report(INVALID_VALUE, format!("cuMemFree of 0x{addr:x}, which is not a live allocation")))
}

/// The live allocation holding `addr` (one-past-the-end counts as inside).
pub(crate) fn find(st: &State, addr: u64) -> Option<(u64, &Alloc)> {
    for d in &st.devices {
        if let Some((&start, a)) = d.allocs.range(..=addr).next_back()
            && addr <= start + a.size as u64
        {
            return Some((start, a));
        }
    }
    None
}

/// Host address of `n` bytes at device address `addr` on device `dev`, all
/// inside one live allocation.
pub(crate) fn translate(st: &State, dev: usize, addr: u64, n: usize) -> Result<*mut u8, String> {
    let Some((start, a)) = find(st, addr) else {
        return Err(format!("0x{addr:x} is not inside any live device allocation"));
    };
    if a.dev != dev {
        return Err(format!("0x{addr:x} belongs to device {}, but the work runs on device {dev}", a.dev));
    }
    let off = (addr - start) as usize;
    if off.checked_add(n).is_none_or(|end| end > a.size) {
        return Err(format!(
            "{n} bytes at offset {off} overrun the {}-byte allocation at 0x{start:x} on device {dev}",
            a.size
        ));
    }
    // SAFETY: off <= size, so the result stays within the allocation's data.
    Ok(unsafe { a.data.add(off) })
}

/// Describes which allocation a faulting host address belongs to.
pub(crate) fn describe_host(st: &State, host: u64) -> String {
    for d in &st.devices {
        for (&start, a) in &d.allocs {
            if a.mapping_contains(host) {
                let off = host as i64 - a.data_host() as i64;
                return format!(
                    "byte offset {off} of the {}-byte allocation at device address 0x{start:x} (device {})",
                    a.size, a.dev
                );
            }
        }
    }
    "an address outside every device allocation".to_string()
}

/// Checks (and repaints) the redzones of the allocations a launch touched.
pub(crate) fn check_redzones(st: &State, touched: &[u64]) -> Result<(), String> {
    for &addr in touched {
        if let Some((start, a)) = find(st, addr)
            && !a.redzone_intact()
        {
            a.repaint();
            return Err(format!(
                "out-of-bounds write next to the {}-byte allocation at 0x{start:x} (device {})",
                a.size, a.dev
            ));
        }
    }
    Ok(())
}

thread_local! {
    /// Device of the launch being unpacked on this thread, and the allocations it named.
    pub(crate) static LAUNCH: RefCell<Option<(usize, Vec<u64>)>> = const { RefCell::new(None) };
}

/// Called by the kernel trampolines for every pointer argument: checks that it
/// lies in a live allocation of the launching device and returns its host address.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devtensor_emu_translate(
    addr: u64,
    host: *mut *mut c_void,
    msg: *mut c_char,
    len: usize,
) -> i32 {
    let result = if addr == 0 {
        Ok(std::ptr::null_mut())
    } else {
        LAUNCH.with(|l| {
            let mut l = l.borrow_mut();
            let Some((dev, touched)) = l.as_mut() else {
                return Err("no launch in progress".to_string());
            };
            let st = crate::state::state();
            let p = translate(&st, *dev, addr, 0)?;
            touched.push(addr);
            Ok(p)
        })
    };
    match result {
        Ok(p) => {
            // SAFETY: the trampoline passes a valid out pointer.
            unsafe { *host = p as *mut c_void };
            0
        }
        Err(m) => {
            let bytes = m.as_bytes();
            let n = bytes.len().min(len.saturating_sub(1));
            // SAFETY: the trampoline passes a buffer of `len` bytes.
            unsafe {
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), msg as *mut u8, n);
                *msg.add(n) = 0;
            }
            ILLEGAL_ADDRESS as i32
        }
    }
}
