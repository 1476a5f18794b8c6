#!/usr/bin/env python3
"""The demo page end to end in headless Chromium (WebGPU on SwiftShader).

    python3 web/tests/page.py [--screenshot docs/web-demo.png] [--gguf TINY.gguf]

Needs the built page (`scripts/web.sh --build-only`), /usr/bin/chromium and
/usr/bin/chromedriver (Debian: `apt-get install chromium chromium-driver`). Speaks
W3C WebDriver to chromedriver with the standard library only, serves web/www
itself, and checks: the page reports its GPU; dataset digits are classified as
their labels; a drawn stroke is classified; training in the tab lowers the loss;
a file that is not a GGUF is a visible error; a tiny random GGUF (written by
`volta-web`'s `tiny_gguf` binary) streams tokens with tok/s shown. Saves a
screenshot and prints timings. Exits non-zero with the reason on failure.
"""
import argparse
import base64
import functools
import gzip
import http.server
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
WWW = os.path.join(ROOT, "web", "www")
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
ELEMENT = "element-6066-11e4-a52e-4f735466cecf"


class Failure(Exception):
    pass


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


class Driver:
    """A WebDriver session on chromedriver at `port`."""

    def __init__(self, port, webgpu=True):
        self.base = f"http://127.0.0.1:{port}"
        flags = ["--enable-unsafe-webgpu", "--enable-unsafe-swiftshader"] if webgpu else ["--disable-webgpu"]
        caps = {
            "capabilities": {
                "alwaysMatch": {
                    "browserName": "chrome",
                    "goog:chromeOptions": {
                        "binary": CHROMIUM,
                        "args": [
                            "--headless=new",
                            "--no-sandbox",
                            "--window-size=1200,1000",
                            "--disable-dev-shm-usage",
                        ] + flags,
                    },
                    "timeouts": {"script": 600_000},
                }
            }
        }
        self.session = self.call("POST", "/session", caps)["sessionId"]

    def call(self, method, path, body=None):
        data = json.dumps(body if body is not None else {}).encode() if method == "POST" else None
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=900) as r:
                return json.loads(r.read())["value"]
        except urllib.error.HTTPError as e:
            detail = json.loads(e.read() or b"{}").get("value", {})
            raise Failure(f"WebDriver {method} {path}: {detail.get('error')}: {detail.get('message', '')[:400]}")

    def s(self, method, path, body=None):
        return self.call(method, f"/session/{self.session}{path}", body)

    def js(self, script, *args):
        return self.s("POST", "/execute/sync", {"script": script, "args": list(args)})

    def js_async(self, script, *args):
        return self.s("POST", "/execute/async", {"script": script, "args": list(args)})

    def element(self, css):
        found = self.s("POST", "/element", {"using": "css selector", "value": css})
        if ELEMENT not in found:
            raise Failure(f"no element reference for {css}: {found}")
        return found[ELEMENT]

    def wait(self, script, what, timeout, poll=0.25):
        end = time.time() + timeout
        while time.time() < end:
            value = self.js(script)
            if value:
                return value
            time.sleep(poll)
        raise Failure(f"timed out after {timeout} s waiting for {what}; page errors: {self.js('return window.voltaDemo && window.voltaDemo.errors')}")

    def close(self):
        try:
            self.s("DELETE", "")
        except Exception:
            pass


def digits_samples():
    """The first image of each class in the bundled digits: {label: 64 pixels}."""
    with gzip.open(os.path.join(ROOT, "data", "digits.csv.gz"), "rt") as f:
        out = {}
        for line in f:
            cols = line.strip().split(",")
            if len(cols) == 65 and int(cols[64]) not in out:
                out[int(cols[64])] = [float(c) for c in cols[:64]]
        return out


def tiny_gguf(path, program=None):
    # `program`: volta-web's `tiny_gguf` as built already; else cargo builds it.
    cmd = [program] if program else ["cargo", "run", "-q", "-p", "volta-web", "--bin", "tiny_gguf", "--"]
    subprocess.run(cmd + [path], check=True, cwd=ROOT, stdout=subprocess.DEVNULL)


def check(condition, message):
    if not condition:
        raise Failure(message)


def run(args, timings):
    for tool, package in [(CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")]:
        if not os.access(tool, os.X_OK):
            raise Failure(f"{tool} is missing: apt-get install chromium chromium-driver (Debian's `{package}`)")
    for f in ["pkg/volta_web.js", "pkg/volta_web_bg.wasm", "digits.safetensors", "digits.csv.gz"]:
        if not os.path.exists(os.path.join(WWW, f)):
            raise Failure(f"web/www/{f} is missing: build the page first (scripts/web.sh --build-only)")

    work = tempfile.mkdtemp(prefix="volta-page-")
    gguf = args.gguf or os.path.join(work, "tiny-test.gguf")
    if not args.gguf:
        tiny_gguf(gguf, args.tiny_gguf_bin)
    bad = os.path.join(work, "not-a-model.gguf")
    with open(bad, "wb") as f:
        f.write(b"this is not a GGUF file\n" * 4)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=WWW))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = free_port()
    driver_proc = subprocess.Popen([CHROMEDRIVER, f"--port={port}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    d = None
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=1)
                break
            except Exception:
                time.sleep(0.1)
        d = Driver(port)
        url = f"http://127.0.0.1:{server.server_address[1]}/"
        t0 = time.time()
        d.s("POST", "/url", {"url": url})
        status = d.wait("const s = window.voltaDemo && window.voltaDemo.status; return s && s !== 'loading' ? s : null",
                        "the page to start", 120)
        if status != "ready":
            raise Failure(f"the page is `{status}`: {d.js('return document.body.innerText')[:600]}")
        timings["page ready (load, GPU open, weights)"] = f"{time.time() - t0:.2f} s"
        adapter = d.js("return window.voltaDemo.adapter")
        header = d.js("return document.getElementById('gpu').textContent")
        print(f"page: {header}")
        check(adapter and adapter["backend"], f"no adapter reported: {adapter}")

        # Dataset digits, one per class, set on the pad and classified.
        samples = digits_samples()
        right = []
        for label in sorted(samples):
            t = time.time()
            got = d.js_async("const done = arguments[arguments.length - 1];"
                             "window.voltaDemo.showImage(arguments[0]).then(p => done(p.digit), e => done('error: ' + e));",
                             samples[label])
            if label == 0:
                timings["first prediction (after ready)"] = f"{1000 * (time.time() - t):.0f} ms"
            right.append(got == label)
            print(f"digit {label}: predicted {got}")
        timings["classification round trip"] = f"{d.js('return window.voltaDemo.classifyMs'):.1f} ms"
        check(sum(right) >= 8, f"only {sum(right)} of 10 dataset digits classified right")

        # A stroke drawn with the pointer: a vertical line.
        before = d.js("return window.voltaDemo.predictions")
        d.js("document.getElementById('clear').click()")
        pad = d.element("#pad")
        moves = [{"type": "pointerMove", "origin": {ELEMENT: pad}, "x": 0, "y": -90, "duration": 0},
                 {"type": "pointerDown", "button": 0}]
        moves += [{"type": "pointerMove", "origin": {ELEMENT: pad}, "x": 0, "y": y, "duration": 10} for y in range(-80, 91, 10)]
        moves += [{"type": "pointerUp", "button": 0}]
        d.s("POST", "/actions", {"actions": [{"type": "pointer", "id": "mouse", "parameters": {"pointerType": "mouse"}, "actions": moves}]})
        d.wait(f"return window.voltaDemo.predictions > {before}", "a prediction of the drawn stroke", 30)
        time.sleep(0.5)
        stroke = d.js("return window.voltaDemo.prediction.digit")
        print(f"drawn vertical stroke: predicted {stroke}")

        # Training in the tab: `--train-steps` steps (0: a whole epoch), then Stop,
        # which evaluates on the held-out digits and hands the weights to the pad.
        d.js("document.getElementById('epochs').value = 1; document.getElementById('train').click()")
        if args.train_steps:
            d.wait(f"const s = window.voltaDemo.train.steps; return (s.length && s[s.length - 1].step >= {args.train_steps}) "
                   "|| window.voltaDemo.errors.length", f"{args.train_steps} training steps", 600, poll=1)
            d.js("if (window.voltaDemo.train.running) document.getElementById('train').click()")
        d.wait("return window.voltaDemo.train.done || window.voltaDemo.errors.length", "training to finish", 600, poll=1)
        train = d.js("return window.voltaDemo.train")
        check(train["done"], f"training failed: {d.js('return window.voltaDemo.errors')}")
        losses = [s["loss"] for s in train["steps"]]
        first, last = losses[0], min(losses[-3:])
        print(f"training: {train['steps'][-1]['step']} steps, loss {first:.3f} -> {last:.3f}, "
              f"test accuracy {100 * train['testAccuracy']:.1f}%")
        timings["training step (batch 32, SwiftShader)"] = f"{train['msPerStep']:.1f} ms"
        check(last < 0.95 * first, f"the loss did not fall: {first:.3f} -> {last:.3f}")

        # Chat: a file that is not a GGUF is a visible error; the tiny model streams.
        file_input = d.element("#gguf")
        d.s("POST", f"/element/{file_input}/value", {"text": bad})
        d.wait("return document.getElementById('chat-status').classList.contains('error')", "the bad file's error", 60)
        bad_status = d.js("return document.getElementById('chat-status').textContent")
        print(f"bad file: {bad_status}")
        d.js("document.getElementById('gguf').value = ''")
        t = time.time()
        d.s("POST", f"/element/{file_input}/value", {"text": gguf})
        d.wait("return window.voltaDemo.chat.loaded", "the GGUF to load", 120)
        timings["tiny GGUF load"] = f"{time.time() - t:.2f} s"
        d.js("document.getElementById('prompt').value = arguments[0];"
             "document.getElementById('max-tokens').value = arguments[1];"
             "document.getElementById('temperature').value = 0;"
             "document.getElementById('send').click()", args.prompt, args.max_tokens)
        d.wait("return window.voltaDemo.chat.done || (window.voltaDemo.errors.length > 1)", "the answer to finish", 300, poll=0.5)
        chat = d.js("return window.voltaDemo.chat")
        chat_status = d.js("return document.getElementById('chat-status').textContent")
        print(f"chat: {chat['tokens']} tokens; {chat_status}")
        check(chat["done"] and chat["tokens"] >= min(16, args.max_tokens), f"only {chat['tokens']} tokens streamed: {chat_status}")
        if args.expect:
            answer = d.js("return document.getElementById('answer').textContent")
            print(f"answer: {answer!r}")
            check(args.expect in answer, f"the answer lacks {args.expect!r}: {answer!r}")
        check("tok/s" in chat_status, f"no tok/s shown: {chat_status}")
        timings["model decode" if args.gguf else "tiny model decode"] = f"{chat['tokPerSec']:.1f} tok/s"

        # The screenshot: a dataset 3 on the pad.
        d.js_async("const done = arguments[arguments.length - 1]; window.voltaDemo.showImage(arguments[0]).then(done, done);", samples[3])
        d.js("window.scrollTo(0, 0)")
        png = base64.b64decode(d.s("GET", "/screenshot"))
        os.makedirs(os.path.dirname(os.path.abspath(args.screenshot)), exist_ok=True)
        with open(args.screenshot, "wb") as f:
            f.write(png)
        print(f"screenshot: {args.screenshot}")
        d.close()

        # Without WebGPU the page says so instead of breaking.
        d = Driver(port, webgpu=False)
        d.s("POST", "/url", {"url": url})
        status = d.wait("const s = window.voltaDemo && window.voltaDemo.status; return s && s !== 'loading' ? s : null",
                        "the page without WebGPU", 60)
        shown = d.js("return document.getElementById('gpu').textContent")
        print(f"without WebGPU: {status}: {shown[:100]}")
        check(status == "no-webgpu" and "WebGPU" in shown, f"without WebGPU the page is `{status}`: {shown}")
    finally:
        if d:
            d.close()
        driver_proc.terminate()
        driver_proc.wait(10)
        server.shutdown()
        shutil.rmtree(work, ignore_errors=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--screenshot", default=os.path.join(ROOT, "docs", "web-demo.png"))
    p.add_argument("--gguf", help="a GGUF file for the chat (default: a tiny random one)")
    p.add_argument("--tiny-gguf-bin", help="volta-web's tiny_gguf program, built (default: cargo run)")
    p.add_argument("--prompt", default="Hello, Volta!", help="the chat prompt")
    p.add_argument("--max-tokens", type=int, default=32)
    p.add_argument("--expect", help="text the (greedy) answer must contain, e.g. Paris")
    p.add_argument("--train-steps", type=int, default=0,
                   help="stop training after this many steps (default 0: one whole epoch)")
    args = p.parse_args()
    timings = {}
    start = time.time()
    try:
        run(args, timings)
    except (Failure, subprocess.CalledProcessError) as e:
        print(f"page test FAILED: {e}", file=sys.stderr)
        return 1
    print("timings (headless Chromium, WebGPU on SwiftShader):")
    for k, v in timings.items():
        print(f"  {k}: {v}")
    print(f"page test passed in {time.time() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
