//! The PTX of every kernel file NVRTC compiled, kept for the next use: in
//! memory for the other GPUs of this process (one compile per architecture,
//! not one per device), and on disk for the next process, so that a program
//! started again, or each rank of a distributed job, does not spend seconds
//! of NVRTC on every kernel file it touches. CUDA's own JIT cache
//! (`~/.nv/ComputeCache`) keeps the step after this one, PTX to machine code.
//!
//! The disk cache lives in `DEVTENSOR_KERNEL_CACHE` if that is set (`off`
//! or an empty value turns it off), else in `$XDG_CACHE_HOME/devtensor/kernels`
//! or `~/.cache/devtensor/kernels`. An entry is named by a 128-bit hash of
//! everything that decides the PTX (the source text, the options, NVRTC's
//! version and devtensor's), and holds a checksum of its own body, so a
//! truncated or damaged file is compiled again rather than loaded. Files are
//! written under a temporary name and renamed, so processes that compile the
//! same file at once never read half of one. The cache is only ever a
//! shortcut: a directory that cannot be read or written, or an entry that
//! does not check out, leaves the kernel compiled as without it.

use cudarc::nvrtc::{CompileOptions, Ptx};
use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

/// The largest entry read back: ten times the largest PTX of `kernels/`,
/// so that no file in the cache folder makes memory grow without bound.
const MAX_ENTRY_BYTES: u64 = 64 << 20;

/// The first line of every entry, before its body's checksum.
const HEADER: &str = "// devtensor kernel cache v1 ";

/// The PTX of `source` compiled with `options` (see the module): from this
/// process's memory, from disk, or from NVRTC. `Err` carries NVRTC's
/// message.
pub(crate) fn compile(source: &str, options: CompileOptions) -> Result<Ptx, String> {
    let key = Key::of(source, &options);
    let memory = MEMORY.get_or_init(Default::default);
    if let Some(ptx) = memory.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return Ok(Ptx::from_src(ptx.clone()));
    }
    let dir = directory();
    let ptx = match dir.as_deref().and_then(|dir| read_entry(&dir.join(key.file_name()))) {
        Some(ptx) => ptx,
        None => {
            let compiled = cudarc::nvrtc::compile_ptx_with_opts(source, options).map_err(|e| e.to_string())?;
            let ptx = ptx_text(&compiled).ok_or("NVRTC returned PTX that is not text")?;
            if let Some(dir) = &dir {
                write_entry(dir, &key.file_name(), &ptx);
            }
            ptx
        }
    };
    memory.lock().unwrap_or_else(|e| e.into_inner()).insert(key, ptx.clone());
    Ok(Ptx::from_src(ptx))
}

/// This process's compiled files, by key.
static MEMORY: OnceLock<Mutex<HashMap<Key, String>>> = OnceLock::new();

/// What decides the PTX, hashed twice with different seeds: 128 bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Key(u64, u64);

impl Key {
    fn of(source: &str, options: &CompileOptions) -> Key {
        let nvrtc = nvrtc_version();
        let hash = |seed: u64| {
            let mut h = DefaultHasher::new();
            (seed, env!("CARGO_PKG_VERSION"), nvrtc, source, format!("{options:?}")).hash(&mut h);
            h.finish()
        };
        Key(hash(0), hash(1))
    }

    fn file_name(self) -> String {
        format!("{:016x}{:016x}.ptx", self.0, self.1)
    }
}

/// NVRTC's version, `None` where it cannot tell (then every version shares
/// the entries of that one).
fn nvrtc_version() -> Option<(i32, i32)> {
    let (mut major, mut minor) = (0, 0);
    // SAFETY: called only after the device checked that libnvrtc is
    // present, so cudarc's lazy symbol lookup succeeds; both pointers are
    // valid for one write each.
    let status = unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) };
    status.result().ok().map(|()| (major, minor))
}

/// The cache folder (see the module), `None` when off or unknown.
fn directory() -> Option<PathBuf> {
    match std::env::var_os("DEVTENSOR_KERNEL_CACHE") {
        Some(dir) if dir.is_empty() || dir == "off" => None,
        Some(dir) => Some(PathBuf::from(dir)),
        None => std::env::var_os("XDG_CACHE_HOME")
            .filter(|dir| !dir.is_empty())
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("HOME").filter(|dir| !dir.is_empty()).map(|home| Path::new(&home).join(".cache"))
            })
            .map(|cache| cache.join("devtensor").join("kernels")),
    }
}

/// The PTX text of a compiled image, without its trailing NUL.
fn ptx_text(ptx: &Ptx) -> Option<String> {
    let bytes = ptx.as_bytes()?;
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8(bytes[..end].to_vec()).ok()
}

/// The checksum of an entry's body.
fn checksum(body: &str) -> u64 {
    let mut h = DefaultHasher::new();
    body.hash(&mut h);
    h.finish()
}

/// The PTX of the entry at `path`, if there is one whose checksum holds.
fn read_entry(path: &Path) -> Option<String> {
    let mut text = String::new();
    std::fs::File::open(path).ok()?.take(MAX_ENTRY_BYTES + 1).read_to_string(&mut text).ok()?;
    if text.len() as u64 > MAX_ENTRY_BYTES {
        return None;
    }
    let (header, body) = text.split_once('\n')?;
    let sum = u64::from_str_radix(header.strip_prefix(HEADER)?, 16).ok()?;
    (sum == checksum(body) && !body.is_empty()).then(|| body.to_string())
}

/// Stores `ptx` as `name` in `dir`, quietly giving up on any error.
fn write_entry(dir: &Path, name: &str, ptx: &str) {
    let temporary = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let written = std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::write(&temporary, format!("{HEADER}{:016x}\n{ptx}", checksum(ptx))))
        .and_then(|()| std::fs::rename(&temporary, dir.join(name)));
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An entry reads back as written; a damaged, truncated, foreign or
    /// oversized one reads as missing.
    #[test]
    fn entries_read_back_only_when_whole() {
        let dir = std::env::temp_dir().join(format!("devtensor-kernel-cache-test-{}", std::process::id()));
        let ptx = ".version 9.0\n.target sm_80\n.entry k() { ret; }\n";
        write_entry(&dir, "a.ptx", ptx);
        assert_eq!(read_entry(&dir.join("a.ptx")).as_deref(), Some(ptx));
        let whole = std::fs::read_to_string(dir.join("a.ptx")).unwrap();
        for (name, text) in [
            ("damaged", whole.replace("sm_80", "sm_81")),
            ("truncated", whole[..whole.len() - 5].to_string()),
            ("foreign", format!("not ours\n{ptx}")),
            ("empty", String::new()),
        ] {
            std::fs::write(dir.join(name), text).unwrap();
            assert_eq!(read_entry(&dir.join(name)), None, "{name}");
        }
        let huge = std::fs::File::create(dir.join("huge")).unwrap();
        huge.set_len(MAX_ENTRY_BYTES + 10).unwrap();
        assert_eq!(read_entry(&dir.join("huge")), None);
        assert_eq!(read_entry(&dir.join("missing")), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
