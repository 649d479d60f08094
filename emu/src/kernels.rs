//! The registry of host-compiled kernels and the PTX entry parser.

use std::ffi::c_void;

/// Mirrors `emu::LaunchError` in `shim/emu_launch.h`.
#[repr(C)]
pub(crate) struct LaunchError {
    pub code: i32,
    pub fault_addr: u64,
    pub msg: [u8; 512],
}

impl LaunchError {
    pub(crate) fn new() -> Self {
        LaunchError { code: 0, fault_addr: 0, msg: [0; 512] }
    }
    pub(crate) fn message(&self) -> String {
        let end = self.msg.iter().position(|&b| b == 0).unwrap_or(self.msg.len());
        String::from_utf8_lossy(&self.msg[..end]).into_owned()
    }
}

/// One `extern "C" __global__` kernel compiled into the emulator.
pub(crate) struct KernelEntry {
    pub name: &'static str,
    pub launch: unsafe extern "C" fn(*mut *mut c_void, *const u32, *mut LaunchError) -> i32,
    pub nparams: unsafe extern "C" fn() -> u32,
    /// `nparams` byte sizes, then `nparams` pointer flags.
    pub layout: unsafe extern "C" fn() -> *const u32,
}

impl KernelEntry {
    /// (byte size, is a pointer) of each parameter.
    pub(crate) fn params(&self) -> Vec<(usize, bool)> {
        // SAFETY: the generated functions return a static array of 2 * nparams + 1 entries.
        unsafe {
            let n = (self.nparams)() as usize;
            let l = (self.layout)();
            (0..n).map(|i| (*l.add(i) as usize, *l.add(n + i) != 0)).collect()
        }
    }
}

include!(concat!(env!("OUT_DIR"), "/kernels.rs"));

pub(crate) fn find(name: &str) -> Option<usize> {
    KERNELS.iter().position(|k| k.name == name)
}

/// `.entry NAME(` lines of a PTX module, with the number of `.param`s each declares.
pub(crate) fn ptx_entries(ptx: &str) -> Vec<(String, usize)> {
    let mut out: Vec<(String, usize)> = Vec::new();
    let mut in_params = false;
    for line in ptx.lines() {
        let t = line.trim();
        if let Some(pos) = t.find(".entry ") {
            let rest = t[pos + ".entry ".len()..].trim_start();
            let end = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '$')).unwrap_or(rest.len());
            out.push((rest[..end].to_string(), 0));
            in_params = true;
            // Parameters may also sit on the same line.
            let n = rest.matches(".param").count();
            out.last_mut().unwrap().1 += n;
            if rest.contains(')') {
                in_params = false;
            }
            continue;
        }
        if in_params {
            if t.starts_with(".param") {
                out.last_mut().unwrap().1 += 1;
            }
            if t.starts_with(')') || t.starts_with('{') {
                in_params = false;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::ptx_entries;

    #[test]
    fn parses_entries_and_param_counts() {
        let ptx = ".version 8.0\n.target sm_80\n.visible .entry k_a(\n\t.param .u64 k_a_param_0,\n\t.param .u32 k_a_param_1\n)\n{\n ret;\n}\n.visible .entry k_b()\n{\n}\n";
        assert_eq!(ptx_entries(ptx), vec![("k_a".to_string(), 2), ("k_b".to_string(), 0)]);
    }
}
