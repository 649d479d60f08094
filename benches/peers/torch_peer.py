"""PyTorch's side of the peers bench: a child process that the Rust bench
drives over stdin/stdout, one JSON object per line, so that devtensor, candle
and PyTorch are timed in the same run, alternately, on the same inputs.

Started by `benches/peers` as `python torch_peer.py THREADS`; it answers
`{"torch": version, "threads": n, "capability": ATen's CPU kernels}` once,
then one line per request:

- `{"cmd": "tensor", "name": N, "dtype": "f32"|"i64", "shape": [..], "path": P}`
  reads a tensor the bench wrote (raw little-endian values) and keeps it for
  the next `setup`;
- `{"cmd": "setup", "id": ID, "kind": K, "args": {..}}` builds row `ID` from
  the tensors sent since the last setup, with the function `K` below, and
  answers `{"check": [..]}`: the first values of its result, which the bench
  compares with devtensor's before timing anything;
- `{"cmd": "time", "id": ID, "budget": seconds}` answers `{"seconds": t}`,
  the median time of one run of row `ID` (the same method as the bench's
  `median_time`: warm-up, then batches of runs, median of the batches).

Any failure answers `{"error": text}`. Not a test: `cargo test` never runs it.
"""

import json
import os
import sys
import time
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

CHECK_LEN = 256


def median_time(budget, f):
    """Median seconds per call of `f`: `median_time` in `src/main.rs`."""
    start, warm = time.perf_counter(), 0
    while warm < 3 or (time.perf_counter() - start < budget / 4 and warm < 1000):
        f()
        warm += 1
    estimate = max((time.perf_counter() - start) / warm, 1e-9)
    runs = int(min(max(budget / estimate, 7), 5001))
    inner = max(1, int(-(-20e-6 // estimate)))
    samples = []
    for _ in range(max(7, -(-runs // inner))):
        t = time.perf_counter()
        for _ in range(inner):
            f()
        samples.append((time.perf_counter() - t) / inner)
    samples.sort()
    return samples[len(samples) // 2]


def first_values(t):
    return t.detach().reshape(-1)[:CHECK_LEN].double().tolist()


# ---------------------------------------------------------------------------
# Operation rows: each takes the tensors the bench sent (by name) and the
# row's arguments, and returns (the function to time, its result to check).


def matmul(t, _):
    a, b = t["a"], t["b"]
    return lambda: a @ b, a @ b


def matmul_bf16(t, _):
    a, b = t["a"].bfloat16(), t["b"].bfloat16()
    return lambda: a @ b, a @ b


def add(t, _):
    a, b = t["a"], t["b"]
    return lambda: a + b, a + b


def mul_scalar(t, _):
    a = t["a"]
    return lambda: a * 1.5, a * 1.5


def sum_all(t, _):
    a = t["a"]
    return lambda: a.sum(), a.sum()


def softmax(t, _):
    x = t["x"]
    return lambda: torch.softmax(x, -1), torch.softmax(x, -1)


def reduce_axes(t, args):
    """A reduction over several axes at once, `x.<op>(dims)`."""
    x, dims = t["x"], tuple(args["dims"])
    calls = {
        "sum": lambda: x.sum(dims),
        "mean": lambda: x.mean(dims),
        "var": lambda: x.var(dims),
        "amax": lambda: x.amax(dims),
        "logsumexp": lambda: torch.logsumexp(x, dims),
    }
    f = calls[args["op"]]
    return f, f()


def einsum(t, args):
    """`torch.einsum(equation, a, b)`."""
    a, b, equation = t["a"], t["b"], args["equation"]
    return lambda: torch.einsum(equation, a, b), torch.einsum(equation, a, b)


def conv3d(t, args):
    """`F.conv3d(x, w, b, padding=1)`, forward only or with the gradients
    of the input, weight and bias (a middle layer)."""
    x, w, b = t["x"], t["w"], t["b"]
    y = F.conv3d(x, w, b, padding=1)
    if not args.get("backward"):
        return lambda: F.conv3d(x, w, b, padding=1), y
    x, w, b = with_grad(x, w, b)
    return grads_of(lambda: F.conv3d(x, w, b, padding=1).sum(), [x, w, b]), y


def interpolate(t, args):
    """`F.interpolate(x, scale_factor=2, mode=.., align_corners=..)`, forward
    only or with the input's gradient."""
    x, mode, align = t["x"], args["mode"], args.get("align_corners")
    f = lambda v: F.interpolate(v, scale_factor=2, mode=mode, align_corners=align)
    y = f(x)
    if not args.get("backward"):
        return lambda: f(x), y
    (x,) = with_grad(x)
    return grads_of(lambda: f(x).sum(), [x]), y


def grads_of(loss_fn, inputs):
    """Forward and backward of `loss_fn`, returning the gradients of `inputs`
    (devtensor's `backward()` returns them; nothing accumulates)."""

    def step():
        return torch.autograd.grad(loss_fn(), inputs)

    return step


def with_grad(*tensors):
    return [x.clone().requires_grad_(True) for x in tensors]


def conv2d_fwd(t, args):
    x, w = t["x"], t["w"]
    p = args["padding"]
    return lambda: F.conv2d(x, w, padding=p), F.conv2d(x, w, padding=p)


def conv2d_fwd_bwd(t, args):
    """Gradients of the weight and bias, and of the input when `input_grad`
    (a middle layer) rather than data (a first layer)."""
    x, w, b = t["x"], *with_grad(t["w"], t["b"])
    if args.get("input_grad"):
        x = x.clone().requires_grad_(True)
    p = args["padding"]
    inputs = [w, b] + ([x] if x.requires_grad else [])
    return grads_of(lambda: F.conv2d(x, w, b, padding=p).sum(), inputs), F.conv2d(x, w, b, padding=p)


def linear_fwd_bwd(t, _):
    x, (w, b) = t["x"], with_grad(t["w"], t["b"])
    return grads_of(lambda: F.linear(x, w, b).sum(), [w, b]), F.linear(x, w, b)


def gelu_fwd_bwd(t, _):
    (x,) = with_grad(t["x"])
    return grads_of(lambda: F.gelu(x).sum(), [x]), F.gelu(x)


def layer_norm_fwd_bwd(t, _):
    x, w, b = with_grad(t["x"], t["w"], t["b"])
    shape = w.shape
    out = lambda: F.layer_norm(x, shape, w, b, 1e-5)
    # A weighted sum, so that the gradient of x is not zero by construction.
    g = t["g"]
    return grads_of(lambda: (out() * g).sum(), [x, w, b]), out()


def batch_norm_fwd_bwd(t, _):
    x, w, b = with_grad(t["x"], t["w"], t["b"])
    c = w.shape[0]
    mean, var = torch.zeros(c), torch.ones(c)
    out = lambda: F.batch_norm(x, mean, var, w, b, training=True, momentum=0.1, eps=1e-5)
    g = t["g"]
    result = out()
    mean.zero_(), var.fill_(1.0)
    return grads_of(lambda: (out() * g).sum(), [x, w, b]), result


def softmax_fwd_bwd(t, _):
    (x,) = with_grad(t["x"])
    g = t["g"]
    return grads_of(lambda: (torch.softmax(x, -1) * g).sum(), [x]), torch.softmax(x, -1)


def bmm_fwd_bwd(t, _):
    a, b = with_grad(t["a"], t["b"])
    return grads_of(lambda: (a @ b).sum(), [a, b]), a @ b


def sdpa_fwd(t, _):
    q, k, v = t["q"], t["k"], t["v"]
    attend = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return attend, attend()


def sdpa_fwd_bwd(t, _):
    q, k, v = with_grad(t["q"], t["k"], t["v"])
    g = t["g"]
    out = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return grads_of(lambda: (out() * g).sum(), [q, k, v]), out()


def max_pool_fwd_bwd(t, _):
    (x,) = with_grad(t["x"])
    return grads_of(lambda: F.max_pool2d(x, 2).sum(), [x]), F.max_pool2d(x, 2)


# ---------------------------------------------------------------------------
# Models, with the parameter names of the bench's devtensor models.


class Seed002(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 3, padding=1)
        self.fc = nn.Linear(16 * 32 * 32, 10)

    def forward(self, x):
        return self.fc(F.max_pool2d(F.relu(self.conv(x)), 2).flatten(1))


class LeNet(nn.Module):
    """PyTorch's CIFAR-10 tutorial network."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 5)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = torch.flatten(x, 1)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x):
        y = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
        return F.relu(y + x)


class ResNet(nn.Module):
    """Three residual blocks of 32 channels on 32x32 images."""

    def __init__(self, c=32):
        super().__init__()
        self.stem = nn.Conv2d(3, c, 3, padding=1, bias=False)
        self.stem_bn = nn.BatchNorm2d(c)
        self.b1, self.b2, self.b3 = Block(c), Block(c), Block(c)
        self.fc = nn.Linear(c, 10)

    def forward(self, x):
        x = F.relu(self.stem_bn(self.stem(x)))
        x = self.b3(self.b2(self.b1(x)))
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


MODELS = {"seed002": Seed002, "lenet": LeNet, "resnet": ResNet}


class CharRnn(nn.Module):
    """benches/peers/src/recurrent.rs's char-level model: an embedding, a
    `batch_first` LSTM or GRU, a linear head over the characters."""

    def __init__(self, kind, vocab, embedding, hidden, layers):
        super().__init__()
        self.embed = nn.Embedding(vocab, embedding)
        self.rnn = {"lstm": nn.LSTM, "gru": nn.GRU}[kind](embedding, hidden, num_layers=layers, batch_first=True)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, idx):
        out, _ = self.rnn(self.embed(idx))
        return self.head(out)


def char_rnn_model(t, args):
    model = CharRnn(**args["model"])
    model.load_state_dict({k[len("p:"):]: v for k, v in t.items() if k.startswith("p:")})
    return model


def char_rnn_train_step(t, args):
    """One step of the char model: cross-entropy over every position, Adam."""
    model = char_rnn_model(t, args)
    idx, y = t["idx"], t["y"]
    opt = torch.optim.Adam(model.parameters(), lr=args["lr"])
    logits = model(idx)

    def step():
        loss = F.cross_entropy(model(idx).flatten(0, 1), y.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step, logits


def char_rnn_inference(t, args):
    model = char_rnn_model(t, args)
    model.eval()
    return on_runtime(model, t["idx"], "eager")


def load_model(t, name):
    model = MODELS[name]()
    state = {k[len("p:"):]: v for k, v in t.items() if k.startswith("p:")}
    missing, unexpected = model.load_state_dict(state, strict=False)
    buffers = {n for n, _ in model.named_buffers()}
    if unexpected or set(missing) - buffers:
        raise ValueError(f"{name}: parameters differ: missing {missing}, unexpected {unexpected}")
    return model


def autocast_of(args):
    """The step's `torch.autocast("cpu", dtype=torch.bfloat16)` when the
    row asks for it (`"autocast": "bf16"`), else a scope that does nothing."""
    enabled = args.get("autocast") == "bf16"
    return lambda: torch.autocast("cpu", dtype=torch.bfloat16, enabled=enabled)


def train_step(t, args):
    model = load_model(t, args["model"])
    x, y = t["x"], t["y"]
    if args["optimizer"] == "adam":
        opt = torch.optim.Adam(model.parameters(), lr=args["lr"])
    else:
        opt = torch.optim.SGD(model.parameters(), lr=args["lr"], momentum=args["momentum"])
    logits = model(x)
    amp = autocast_of(args)

    def step():
        with amp():
            loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step, logits


def inference(t, args):
    model = load_model(t, args["model"])
    model.eval()
    return on_runtime(model, t["x"], args.get("runtime", "eager"))


def on_runtime(model, x, runtime):
    """`model(x)` without gradients, run by `runtime`: PyTorch eager, the
    model compiled by `torch.compile` (Inductor's C++ code, compiled on the
    first call, which `setup` makes), or ONNX Runtime on the model exported
    by `torch.onnx.export`, on as many threads as PyTorch."""
    if runtime == "eager":
        def run():
            with torch.no_grad():
                return model(x)
    elif runtime == "compile":
        compiled = torch.compile(model)

        def run():
            with torch.no_grad():
                return compiled(x)
    elif runtime == "onnxruntime":
        import tempfile
        import onnxruntime
        path = os.path.join(tempfile.mkdtemp(prefix="peers-onnx-"), "model.onnx")
        # The TorchScript exporter: the torch.export one needs onnxscript
        # and does not yet take every model here. It warns that it is the
        # older one; the warning says nothing about this model.
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            torch.onnx.export(model, (x,), path, input_names=["x"], dynamo=False)
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = torch.get_num_threads()
        options.inter_op_num_threads = 1
        session = onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        feed = {"x": x.numpy()}

        def run():
            return torch.from_numpy(session.run(None, feed)[0])
    else:
        raise ValueError(f"unknown runtime {runtime}")
    return run, run()


def gpt_model(t, args):
    """`examples/gpt/model.rs`'s GPT, PyTorch's side (`scripts/train_gpt_torch.py`),
    with the bench's weights; `lm_head.weight` is tied to `transformer.wte.weight`.
    Converted with `model.to(torch.bfloat16)` where the row asks (`"dtype": "bf16"`)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
    from train_gpt_torch import Gpt
    model = Gpt(**args["config"])
    state = {k[len("p:"):]: v for k, v in t.items() if k.startswith("p:")}
    missing, unexpected = model.load_state_dict(state, strict=False)
    if unexpected or set(missing) - {"lm_head.weight"}:
        raise ValueError(f"gpt: parameters differ: missing {missing}, unexpected {unexpected}")
    if args.get("dtype") == "bf16":
        model = model.to(torch.bfloat16)
    return model


def gpt_train_step(t, args):
    """One nanoGPT step: loss, backward, clip at 1.0, AdamW with a no-decay group."""
    model = gpt_model(t, args)
    idx, y = t["idx"], t["y"]
    opt = model.optimizer(1e-3, 0.1, (0.9, 0.99))
    logits = model(idx)
    amp = autocast_of(args)

    def step():
        with amp():
            loss = model(idx, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    return step, logits


def gpt_inference(t, args):
    model = gpt_model(t, args)
    model.eval()
    return on_runtime(model, t["idx"], args.get("runtime", "eager"))


def gpt_generate(t, args):
    """Generation with a key/value cache, written as a PyTorch user writes it
    (the Hugging Face / gpt-fast pattern on nanoGPT's modules): the prompt
    once, then each new token alone, its keys and values appended with
    `torch.cat`, sampled at `temperature` among the `top_k` most likely.
    Checked on the prompt's next-token logits."""
    model = gpt_model(t, args)
    prompt, new, temperature, top_k = t["idx"], args["new_tokens"], args["temperature"], args["top_k"]

    def attend(attn, x, past):
        b, n, c = x.shape
        q, k, v = attn.c_attn(x).split(c, dim=2)
        heads = lambda y: y.view(b, n, attn.n_head, c // attn.n_head).transpose(1, 2)
        q, k, v = heads(q), heads(k), heads(v)
        if past is not None:
            k, v = torch.cat([past[0], k], dim=2), torch.cat([past[1], v], dim=2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=past is None)
        return attn.c_proj(y.transpose(1, 2).reshape(b, n, c)), (k, v)

    def next_logits(idx, cache):
        seen = 0 if cache[0] is None else cache[0][0].shape[2]
        n = idx.shape[1]
        x = model.transformer.wte(idx) + model.transformer.wpe(torch.arange(seen, seen + n))
        for i, block in enumerate(model.transformer.h):
            y, cache[i] = attend(block.attn, block.ln_1(x), cache[i])
            x = x + y
            x = x + block.mlp(block.ln_2(x))
        return model.lm_head(model.transformer.ln_f(x[:, -1, :]))

    def run():
        with torch.no_grad():
            cache = [None] * len(model.transformer.h)
            tokens, idx = prompt, prompt
            for _ in range(new):
                logits = next_logits(idx, cache) / temperature
                kth = torch.topk(logits, top_k).values[:, [-1]]
                logits = logits.masked_fill(logits < kth, float("-inf"))
                idx = torch.multinomial(F.softmax(logits, dim=-1), 1)
                tokens = torch.cat([tokens, idx], dim=1)
            return tokens

    with torch.no_grad():
        first = next_logits(prompt, [None] * len(model.transformer.h))
    return run, first


KINDS = {f.__name__: f for f in [
    matmul, matmul_bf16, add, mul_scalar, sum_all, softmax, reduce_axes, einsum, conv3d, interpolate, conv2d_fwd, conv2d_fwd_bwd, linear_fwd_bwd, gelu_fwd_bwd,
    layer_norm_fwd_bwd, batch_norm_fwd_bwd, softmax_fwd_bwd, bmm_fwd_bwd, sdpa_fwd, sdpa_fwd_bwd, max_pool_fwd_bwd,
    train_step, inference, gpt_train_step, gpt_inference, gpt_generate, char_rnn_train_step, char_rnn_inference,
]}

DTYPES = {"f32": torch.float32, "i64": torch.int64}


def main():
    threads = int(sys.argv[1])
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    reply({"torch": torch.__version__, "threads": torch.get_num_threads(),
           "capability": torch.backends.cpu.get_cpu_capability()})
    pending, rows = {}, {}
    for line in sys.stdin:
        request = json.loads(line)
        try:
            cmd = request["cmd"]
            if cmd == "tensor":
                with open(request["path"], "rb") as f:
                    raw = bytearray(f.read())
                dtype = DTYPES[request["dtype"]]
                pending[request["name"]] = torch.frombuffer(raw, dtype=dtype).reshape(request["shape"])
                reply({"ok": True})
            elif cmd == "setup":
                f, result = KINDS[request["kind"]](pending, request.get("args", {}))
                pending = {}
                rows[request["id"]] = f
                reply({"check": first_values(result)})
            elif cmd == "time":
                reply({"seconds": median_time(request["budget"], rows[request["id"]])})
            else:
                raise ValueError(f"unknown command {cmd}")
        except Exception as e:  # The bench prints it and goes on without this row.
            pending = {}
            reply({"error": f"{type(e).__name__}: {e}"})


def reply(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
