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

/// Byte width of one `.param` declaration (`.param .u64 x`, `.param .align 8 .b8 x[16]`).
fn param_width(decl: &str) -> usize {
    let mut width = 0;
    let mut count = 1;
    for tok in decl.split_whitespace() {
        let tok = tok.trim_end_matches(',');
        if let Some(ty) = tok.strip_prefix('.') {
            let digits: String = ty.chars().skip_while(|c| c.is_ascii_alphabetic()).collect();
            if ty.starts_with(['u', 's', 'b', 'f']) && !digits.is_empty() {
                width = digits.parse::<usize>().map(|b| b / 8).unwrap_or(0);
            }
        } else if let (Some(open), Some(close)) = (tok.find('['), tok.find(']')) {
            count = tok[open + 1..close].parse().unwrap_or(1);
        }
    }
    width * count
}

/// `.entry NAME(` declarations of a PTX module, with the byte width of each parameter.
pub(crate) fn ptx_entries(ptx: &str) -> Vec<(String, Vec<usize>)> {
    let mut out: Vec<(String, Vec<usize>)> = Vec::new();
    let mut in_params = false;
    for line in ptx.lines() {
        let t = line.trim();
        let mut params_part = None;
        if let Some(pos) = t.find(".entry ") {
            let rest = t[pos + ".entry ".len()..].trim_start();
            let end = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '$')).unwrap_or(rest.len());
            out.push((rest[..end].to_string(), Vec::new()));
            in_params = true;
            params_part = Some(&rest[end..]);
        } else if in_params {
            params_part = Some(t);
        }
        let Some(part) = params_part else { continue };
        let part = part.trim_start_matches(|c: char| c == '(' || c.is_whitespace());
        for decl in part.split(".param").skip(1) {
            out.last_mut().unwrap().1.push(param_width(decl));
        }
        if part.contains(')') || part.starts_with('{') {
            in_params = false;
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
        assert_eq!(ptx_entries(ptx), vec![("k_a".to_string(), vec![8, 4]), ("k_b".to_string(), vec![])]);
        let weak = ".weak .entry k_c(.param .align 8 .b8 k_c_param_0[16], .param .f64 k_c_param_1)\n{\n}\n";
        assert_eq!(ptx_entries(weak), vec![("k_c".to_string(), vec![16, 8])]);
    }
}
