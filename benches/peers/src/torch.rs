//! PyTorch in the same run: a `torch_peer.py` child process, driven one JSON
//! line at a time, that builds each row from the very tensors devtensor uses
//! (written to a scratch folder as raw values) and times it on request, so
//! that its timings interleave with devtensor's and candle's.
//!
//! The Python environment comes from `torch-env.sh` (made once, in
//! `.cache/peers-torch`). `DEVTENSOR_PEERS_PYTHON` names another interpreter
//! with PyTorch; `DEVTENSOR_PEERS_TORCH=off` leaves PyTorch out. When PyTorch
//! cannot be had, the bench says why and prints its other columns.

use devtensor::backend::cpu::CpuIsa;
use devtensor::nn::Module;
use devtensor::{Cpu, Tensor};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

/// The PyTorch child, or the reason there is none.
pub struct Torch {
    peer: Option<Peer>,
}

struct Peer {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    scratch: PathBuf,
    sent: usize,
}

impl Torch {
    /// Starts PyTorch with `threads` intra-op threads, or explains on stderr
    /// why the run goes on without it.
    pub fn start(threads: usize) -> (Torch, String) {
        match Peer::start(threads) {
            Ok((peer, version)) => (Torch { peer: Some(peer) }, version),
            Err(why) => {
                eprintln!("peers: running without PyTorch: {why}");
                (Torch { peer: None }, "not run".into())
            }
        }
    }

    /// No PyTorch: every row goes without it.
    pub fn none() -> Torch {
        Torch { peer: None }
    }

    /// Sends `x` as the `f32` tensor named `name` of the next `setup`.
    pub fn tensor(&mut self, name: &str, x: &Tensor<Cpu>) {
        let bytes = x.to_vec().iter().flat_map(|v| v.to_le_bytes()).collect();
        self.send(name, "f32", x.dims(), bytes);
    }

    /// Sends `x` as the `i64` tensor named `name` (class labels).
    pub fn labels(&mut self, name: &str, x: &Tensor<Cpu, i64>) {
        let bytes = x.to_vec().iter().flat_map(|v| v.to_le_bytes()).collect();
        self.send(name, "i64", x.dims(), bytes);
    }

    fn send(&mut self, name: &str, dtype: &str, dims: &[usize], bytes: Vec<u8>) {
        let Some(peer) = &mut self.peer else { return };
        let path = peer.scratch.join(format!("{}.bin", peer.sent));
        peer.sent += 1;
        std::fs::write(&path, bytes).expect("peers: writing a tensor for PyTorch");
        let request = json!({"cmd": "tensor", "name": name, "dtype": dtype, "shape": dims, "path": path});
        if let Err(e) = peer.request(request) {
            panic!("peers: PyTorch could not read {name}: {e}");
        }
    }

    /// Sends every parameter of `model` by its PyTorch name (`p:<name>`).
    pub fn model<M: Module<Cpu>>(&mut self, model: &M) {
        for (name, t) in model.parameters() {
            self.tensor(&format!("p:{name}"), &t);
        }
    }

    /// Builds PyTorch's row `id` with its function `kind` from the tensors sent
    /// since the last setup, and checks its first values against `ours` (within
    /// `tolerance`, relative to 1 + |value|). Returns whether PyTorch has the row.
    pub fn setup(&mut self, id: &str, kind: &str, args: Value, ours: &[f32], tolerance: f64) -> bool {
        let Some(peer) = &mut self.peer else { return false };
        let theirs = match peer.request(json!({"cmd": "setup", "id": id, "kind": kind, "args": args})) {
            Ok(reply) => reply["check"].as_array().cloned().unwrap_or_default(),
            Err(e) => {
                eprintln!("peers: PyTorch has no row {id}: {e}");
                return false;
            }
        };
        assert!(!theirs.is_empty() && theirs.len() <= ours.len(), "{id}: PyTorch's result has {} values", theirs.len());
        for (i, (&a, b)) in ours.iter().zip(&theirs).enumerate() {
            // PyTorch sends f32 values as decimal f64s, which serde_json parses
            // within an ulp of f64: rounding to f32 recovers the exact value.
            let b = b.as_f64().expect("a number") as f32 as f64;
            assert!(
                (a as f64 - b).abs() <= tolerance * (1.0 + b.abs()),
                "{id}: devtensor and PyTorch differ at {i}: {a} against {b}"
            );
        }
        true
    }

    /// The median time of one run of PyTorch's row `id`, timed for `budget`.
    pub fn time(&mut self, id: &str, budget: Duration) -> Duration {
        let peer = self.peer.as_mut().expect("PyTorch is running");
        match peer.request(json!({"cmd": "time", "id": id, "budget": budget.as_secs_f64()})) {
            Ok(reply) => Duration::from_secs_f64(reply["seconds"].as_f64().expect("seconds")),
            Err(e) => panic!("peers: PyTorch failed timing {id}: {e}"),
        }
    }
}

impl Peer {
    fn start(threads: usize) -> Result<(Peer, String), String> {
        if std::env::var("DEVTENSOR_PEERS_TORCH").as_deref() == Ok("off") {
            return Err("DEVTENSOR_PEERS_TORCH=off".into());
        }
        let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let python = match std::env::var("DEVTENSOR_PEERS_PYTHON") {
            Ok(python) => python,
            Err(_) => {
                let out = Command::new("bash")
                    .arg(here.join("torch-env.sh"))
                    .stderr(Stdio::inherit())
                    .output()
                    .map_err(|e| format!("cannot run torch-env.sh: {e}"))?;
                if !out.status.success() {
                    return Err("torch-env.sh could not set up PyTorch (its messages are above)".into());
                }
                String::from_utf8_lossy(&out.stdout).trim().to_string()
            }
        };
        let mut command = Command::new(&python);
        if crate::capped() {
            // PyTorch's own switches for the same cap: its element-wise
            // kernels (ATen), MKL's products and oneDNN's convolutions.
            let isa = Cpu::isa();
            let (aten, mkl, onednn) = match isa {
                CpuIsa::Avx2 => ("avx2", "AVX2", "AVX2"),
                _ => ("default", "SSE4_2", "SSE41"),
            };
            command
                .env("ATEN_CPU_CAPABILITY", aten)
                .env("MKL_ENABLE_INSTRUCTIONS", mkl)
                .env("ONEDNN_MAX_CPU_ISA", onednn);
        }
        let mut child = command
            .arg(here.join("torch_peer.py"))
            .arg(threads.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start {python}: {e}"))?;
        let scratch = std::env::temp_dir().join(format!("devtensor-peers-{}", std::process::id()));
        std::fs::create_dir_all(&scratch).map_err(|e| format!("cannot make {}: {e}", scratch.display()))?;
        let mut peer = Peer {
            stdin: child.stdin.take().expect("piped"),
            stdout: BufReader::new(child.stdout.take().expect("piped")),
            child,
            scratch,
            sent: 0,
        };
        let hello = peer.read().map_err(|e| format!("torch_peer.py did not start: {e}"))?;
        let version = format!(
            "{} ({} kernels)",
            hello["torch"].as_str().unwrap_or("?"),
            hello["capability"].as_str().unwrap_or("?")
        );
        if hello["threads"].as_u64() != Some(threads as u64) {
            return Err(format!("PyTorch runs {} threads, not {threads}", hello["threads"]));
        }
        Ok((peer, version))
    }

    fn request(&mut self, request: Value) -> Result<Value, String> {
        writeln!(self.stdin, "{request}").map_err(|e| format!("PyTorch is gone: {e}"))?;
        self.stdin.flush().map_err(|e| format!("PyTorch is gone: {e}"))?;
        self.read()
    }

    fn read(&mut self) -> Result<Value, String> {
        let mut line = String::new();
        match self.stdout.read_line(&mut line) {
            Ok(0) | Err(_) => return Err("PyTorch closed its output".into()),
            Ok(_) => {}
        }
        let reply: Value = serde_json::from_str(&line).map_err(|e| format!("unreadable reply {line:?}: {e}"))?;
        match reply["error"].as_str() {
            Some(error) => Err(error.to_string()),
            None => Ok(reply),
        }
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.scratch);
    }
}
