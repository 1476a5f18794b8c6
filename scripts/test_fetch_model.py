#!/usr/bin/env python3
"""fetch_model.py's cache folder follows the Rust side's rule (the GPU tuning cache's
`cache_dir()`): `$VOLTA_CACHE_DIR`, else `$XDG_CACHE_HOME/volta`, else
`~/.cache/volta`; the deprecated `$VOLTA_CACHE` still works, with a note.

    python3 scripts/test_fetch_model.py       (scripts/test.sh runs it)
"""
import os
import sys
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in scripts/
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fetch_model  # noqa: E402


def cache_dir(**env):
    notes = []
    env.setdefault("HOME", "/home/u")
    return fetch_model.cache_dir(env, notes.append), notes


class CacheDir(unittest.TestCase):
    def test_volta_cache_dir_first(self):
        self.assertEqual(
            cache_dir(VOLTA_CACHE_DIR="/v", XDG_CACHE_HOME="/x"), ("/v", [])
        )

    def test_then_xdg_cache_home_then_home(self):
        self.assertEqual(cache_dir(XDG_CACHE_HOME="/x"), ("/x/volta", []))
        self.assertEqual(cache_dir(), ("/home/u/.cache/volta", []))

    def test_empty_variables_count_as_unset(self):
        self.assertEqual(
            cache_dir(VOLTA_CACHE_DIR="", XDG_CACHE_HOME="", VOLTA_CACHE=""),
            ("/home/u/.cache/volta", []),
        )

    def test_the_old_name_still_works_with_a_one_line_note(self):
        path, notes = cache_dir(VOLTA_CACHE="/old", XDG_CACHE_HOME="/x")
        self.assertEqual(path, "/old")
        self.assertEqual(len(notes), 1)
        self.assertIn("VOLTA_CACHE_DIR", notes[0])
        self.assertNotIn("\n", notes[0])
        path, notes = cache_dir(VOLTA_CACHE="/old", VOLTA_CACHE_DIR="/v")
        self.assertEqual(path, "/v")
        self.assertEqual(len(notes), 1)
        self.assertIn("ignored", notes[0])


if __name__ == "__main__":
    unittest.main()
