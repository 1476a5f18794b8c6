"""The language model from Python: `volta.Llama`, `volta.Tokenizer`, `volta.Generation`.

The model tests run SmolLM2-135M-Instruct's real GGUF file: `$VOLTA_SMOLLM2`, else the
copy `scripts/fetch_model.py` keeps in Volta's cache folder (the Rust suite's rule);
they skip, saying so, only when neither is there. Answers are compared with the Rust
example's (`examples/generate.rs`, its binary named by `$VOLTA_GENERATE_EXAMPLE`, which
`scripts/python-tests.sh` builds): the same prompt, the same text.
"""

import math
import os
import struct
import subprocess
import threading
import time
from pathlib import Path

import pytest

import volta

PROMPT = "What is the capital of France?"
# The greedy answer with f32 activations (the GPU's, and llama.cpp's on the GPU),
# and the CPU's default with 8-bit activations (llama.cpp's CPU answer, token for
# token: the first token is a near tie, 0.08 apart in f32).
ANSWER = "The capital of France is Paris."
ANSWER_INT8 = "L'Étoile, la Marseillaise,"


def _model_path():
    """The model file by the Rust suite's rule (`volta/tests/support/mod.rs`)."""
    named = os.environ.get("VOLTA_SMOLLM2")
    if named:
        assert os.path.exists(named), (
            f"VOLTA_SMOLLM2 names {named}, which does not exist (run scripts/fetch_model.py)"
        )
        return named
    env = os.environ
    if env.get("VOLTA_CACHE_DIR"):
        cache = Path(env["VOLTA_CACHE_DIR"])
    elif env.get("XDG_CACHE_HOME"):
        cache = Path(env["XDG_CACHE_HOME"]) / "volta"
    else:
        cache = Path.home() / ".cache" / "volta"
    path = cache / "SmolLM2-135M-Instruct.Q4_1.gguf"
    return str(path) if path.exists() else None


MODEL = _model_path()
needs_model = pytest.mark.skipif(
    MODEL is None,
    reason="no SmolLM2-135M GGUF file: set VOLTA_SMOLLM2, or run scripts/fetch_model.py "
    "(scripts/test.sh does)",
)


@pytest.fixture(scope="module")
def llama_cpu():
    return volta.Llama.from_gguf(MODEL, device="cpu")


@pytest.fixture(scope="module")
def llama_gpu():
    return volta.Llama.from_gguf(MODEL, device="gpu")


@pytest.fixture(scope="module")
def tokenizer():
    return volta.Tokenizer.from_gguf(MODEL)


def rust_example(prompt, device, max_tokens, *sampling):
    """Starts `examples/generate.rs` on `prompt`; the function returned waits for the text
    it prints (its stdout, less the newline it ends with). Started first, it runs beside
    the Python side: on lavapipe each process spends seconds compiling its kernels, on
    one CPU core."""
    example = os.environ.get("VOLTA_GENERATE_EXAMPLE")
    assert example and os.path.exists(example), (
        "VOLTA_GENERATE_EXAMPLE must name the built example "
        "(`cargo build -p volta-examples --example generate`; scripts/python-tests.sh does)"
    )
    argv = [example, "--model", MODEL, "--prompt", prompt, "--device", device]
    argv += ["--max-tokens", str(max_tokens), *map(str, sampling)]
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def text():
        out, err = process.communicate(timeout=600)
        assert process.returncode == 0, err.decode(errors="replace")
        out = out.decode()
        assert out.endswith("\n"), out
        return out[:-1]

    return text


def answer(llama, prompt=PROMPT, **kwargs):
    return "".join(llama.generate(prompt, **kwargs))


# On the GPU the test runs on lavapipe (Vulkan on the CPU) in CI: a few tokens, as the
# Rust suite's GPU test (a prompt and two decode steps).
@needs_model
@pytest.mark.parametrize(
    ("device", "max_tokens", "expected"),
    [("cpu", 12, ANSWER_INT8), ("gpu", 3, "The capital of")],
)
def test_greedy_answer_equals_the_rust_examples(request, device, max_tokens, expected):
    rust = rust_example(PROMPT, device, max_tokens)
    llama = request.getfixturevalue(f"llama_{device}")
    assert llama.device.type == device
    text = answer(llama, max_tokens=max_tokens)
    assert text == rust()
    assert text == expected


@needs_model
def test_seeded_sampling_repeats_and_equals_the_rust_examples(llama_cpu):
    # The library's sampler, drawing from the same seeded generator as the example.
    rust = rust_example(
        PROMPT, "cpu", 8, "--temperature", 0.9, "--top-k", 40, "--top-p", 0.95, "--seed", 1
    )
    sampling = dict(temperature=0.9, top_k=40, top_p=0.95)
    first = answer(llama_cpu, max_tokens=8, seed=1, **sampling)
    assert answer(llama_cpu, max_tokens=8, seed=1, **sampling) == first
    assert first == rust()
    others = {answer(llama_cpu, max_tokens=4, seed=s, temperature=1.5) for s in range(2, 5)}
    assert len(others) > 1, "different seeds all drew the same answer"


@needs_model
def test_the_stream_yields_pieces_that_add_up_to_the_answer(llama_cpu):
    generation = llama_cpu.generate(PROMPT, max_tokens=12)
    assert iter(generation) is generation
    pieces = list(generation)
    assert len(pieces) >= 5 and all(isinstance(p, str) and p for p in pieces), pieces
    assert "".join(pieces) == ANSWER_INT8
    assert generation.prompt_tokens == 37
    # The end-of-turn token ends the answer unwritten.
    ids = generation.token_ids
    assert llama_cpu.tokenizer.decode(ids) == ANSWER_INT8
    assert llama_cpu.tokenizer.eos not in ids
    assert list(generation) == []  # exhausted
    assert list(llama_cpu.generate(PROMPT, max_tokens=0)) == []
    # Cut short: at most max_tokens tokens.
    short = llama_cpu.generate(PROMPT, max_tokens=3)
    assert "".join(short) == "L'É" and len(short.token_ids) == 3


@needs_model
def test_loading_and_decoding_release_the_gil():
    """While another thread loads the model and generates, this one keeps running: it
    ticks every millisecond or so, where a held GIL would let it tick only between the
    steps (a few dozen times)."""
    done = threading.Event()
    result = {}

    def work():
        start = time.perf_counter()
        llama = volta.Llama.from_gguf(MODEL)
        result["text"] = answer(llama, max_tokens=6)
        result["seconds"] = time.perf_counter() - start
        done.set()

    worker = threading.Thread(target=work)
    ticks, last, longest = 0, time.perf_counter(), 0.0
    worker.start()
    while not done.is_set():
        time.sleep(0.001)
        now = time.perf_counter()
        ticks, longest, last = ticks + 1, max(longest, now - last), now
    worker.join()
    assert result["text"] == "L'Étoile,"
    report = f"{ticks} ticks in {result['seconds']:.2f} s, the longest pause {longest:.3f} s"
    assert ticks >= 200, report


@needs_model
def test_generations_run_side_by_side_in_threads(llama_cpu):
    texts = [None] * 3

    def run(i):
        texts[i] = answer(llama_cpu, max_tokens=6)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert texts == ["L'Étoile,"] * 3


@needs_model
def test_f32_activations_give_the_gpus_answer_on_the_cpu():
    llama = volta.Llama.from_gguf(MODEL, device="cpu", activations="f32")
    assert answer(llama, max_tokens=12) == ANSWER
    with pytest.raises(ValueError, match="activations must be"):
        volta.Llama.from_gguf(MODEL, activations="int4")


@needs_model
def test_the_tokenizer_round_trips(tokenizer, llama_cpu):
    assert tokenizer.vocab_size == len(tokenizer) == 49152
    assert tokenizer.eos == tokenizer.token_id("<|im_end|>") == 2
    assert tokenizer.bos is not None and tokenizer.token_id("no such token") is None
    for text in [
        "Hello, world!",
        "  two spaces, 12345 digits\nand a newline\t",
        "émigré, 東京, 🦀 and ∑x²",
        "<|im_start|>user\nHi<|im_end|>\n",
        "",
    ]:
        ids = tokenizer.encode(text)
        assert all(isinstance(i, int) and 0 <= i < 49152 for i in ids)
        assert tokenizer.decode(ids) == text
        assert llama_cpu.tokenizer.encode(text) == ids
    ids = tokenizer.encode("<|im_start|>user\nHi<|im_end|>")
    assert ids[0] == tokenizer.token_id("<|im_start|>") and ids[-1] == tokenizer.eos
    assert tokenizer.decode(ids, skip_special_tokens=True) == "user\nHi"
    # Half of a character decodes to U+FFFD.
    crab = tokenizer.encode("🦀")
    assert len(crab) > 1 and tokenizer.decode(crab[:1]) == "\ufffd"
    for bad in ([-1], [49152]):
        with pytest.raises(ValueError, match="outside the vocabulary"):
            tokenizer.decode(bad)
    with pytest.raises(TypeError):
        tokenizer.encode(12)
    assert repr(tokenizer) == "Tokenizer(vocab_size=49152)"


@needs_model
def test_the_model_describes_itself(llama_cpu):
    assert llama_cpu.context_length == 8192
    assert isinstance(llama_cpu.tokenizer, volta.Tokenizer)
    assert llama_cpu.device == volta.Device.cpu()
    assert repr(llama_cpu) == "Llama('SmolLM2-135M', device='cpu')"
    assert "prompt tokens" in repr(llama_cpu.generate(PROMPT))


@needs_model
@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(temperature=-1.0), "temperature"),
        (dict(temperature=math.nan), "temperature"),
        (dict(temperature=math.inf), "temperature"),
        (dict(top_p=0.0), "top_p"),
        (dict(top_p=1.5), "top_p"),
        (dict(top_p=-0.1), "top_p"),
        (dict(top_k=-1), "top_k"),
        (dict(max_tokens=-1), "max_tokens"),
        (dict(seed=-1), "seed"),
    ],
)
def test_bad_arguments_raise_value_error(llama_cpu, kwargs, match):
    with pytest.raises(ValueError, match=match):
        llama_cpu.generate(PROMPT, **kwargs)


@needs_model
def test_a_prompt_past_the_context_is_a_value_error(llama_cpu):
    with pytest.raises(ValueError, match="context"):
        llama_cpu.generate("Paris " * 9000)


# Malformed files. GGUF: "GGUF", version (u32), tensor count (u64), metadata count (u64),
# then each key (u64 length + bytes), its value type (u32) and value.
def gguf_header(n_tensors=0, n_metadata=0, version=3):
    return b"GGUF" + struct.pack("<IQQ", version, n_tensors, n_metadata)


def assert_malformed(path, offset=True):
    """Both loaders raise FileFormatError naming `path` (and an offset)."""
    for load in (volta.Tokenizer.from_gguf, volta.Llama.from_gguf):
        with pytest.raises(volta.FileFormatError) as raised:
            load(path)
        message = str(raised.value)
        assert str(path) in message, message
        if offset:
            assert "offset" in message, message
        assert isinstance(raised.value, ValueError)


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(b"", id="empty"),
        pytest.param(b"GGML" + bytes(20), id="wrong-magic"),
        pytest.param(bytes(range(256)) * 4, id="garbage"),
        pytest.param(gguf_header()[:10], id="truncated-header"),
        pytest.param(gguf_header(version=99), id="unknown-version"),
        # A key 1000 bytes long in a file that ends after 3 of them.
        pytest.param(gguf_header(n_metadata=1) + struct.pack("<Q", 1000) + b"abc", id="truncated"),
        # After a valid header, bytes that claim 2**62 tensors.
        pytest.param(gguf_header(n_tensors=1 << 62) + os.urandom(64), id="huge-count"),
        # A metadata value of type 99, which GGUF does not define.
        pytest.param(
            gguf_header(n_metadata=1) + struct.pack("<Q", 1) + b"k" + struct.pack("<I", 99),
            id="unknown-value-type",
        ),
    ],
)
def test_malformed_files_raise_file_format_error_naming_file_and_offset(tmp_path, content):
    path = tmp_path / "bad.gguf"
    path.write_bytes(content)
    assert_malformed(path)


def test_a_gguf_file_without_a_model_is_a_file_format_error(tmp_path):
    path = tmp_path / "empty-model.gguf"
    path.write_bytes(gguf_header())
    assert_malformed(path, offset=False)


def test_a_missing_file_is_file_not_found_error(tmp_path):
    missing = tmp_path / "missing.gguf"
    for load in (volta.Tokenizer.from_gguf, volta.Llama.from_gguf):
        with pytest.raises(FileNotFoundError, match="missing.gguf"):
            load(missing)


def test_an_unknown_device_is_a_value_error(tmp_path):
    with pytest.raises(ValueError, match="unknown device"):
        volta.Llama.from_gguf(tmp_path / "any.gguf", device="tpu")


@needs_model
@pytest.mark.parametrize("keep", [1000, 0.5], ids=["in-the-metadata", "in-the-tensors"])
def test_a_truncated_model_file_is_a_file_format_error(tmp_path, keep):
    data = Path(MODEL).read_bytes()
    keep = keep if isinstance(keep, int) else int(len(data) * keep)
    path = tmp_path / "truncated.gguf"
    path.write_bytes(data[:keep])
    assert_malformed(path)
    # The same bytes with another magic.
    path.write_bytes(b"GGJT" + data[4:1000])
    assert_malformed(path)
