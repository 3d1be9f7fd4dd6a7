#!/usr/bin/env python3
"""Write a random-weight Llama model as a GGUF file, deterministically, with
the standard library alone: what llamaserve serves in the tests, the
benchmark and the demo. Its output is noise, its costs are a real engine's.

  genmodel.py --size tiny|small|large --out FILE [--seed N]

The same size and seed always give the same bytes. Sizes (SIZES below):
small (4 layers, 256 wide: ~3.7M parameters, 7.4 MB) for the tests;
tiny (1 x 64) where a test needs an engine fast enough for the gateway's
speed fit (test_real.py); large (6 x 384) for the benchmark, where a prompt
computed cold must cost many times one mostly cached.

Tokenizer: llama.cpp's "llama" model (SentencePiece-style BPE with byte
fallback: a character no piece covers becomes its <0xXX> byte tokens), 512
tokens: 5 special (<unk>, <s>, </s>, <|im_start|>, <|im_end|>), the 256
bytes, then pieces learned by BPE over a fixed corpus of pronounceable
words (lowercase consonant-vowel words, as the workloads' text is made of:
tools/bench/realwl.py), each merge scored by its rank. No piece holds a
newline, so a chat turn's tokens never merge across the template's line
ends: a conversation's next prompt starts with its previous prompt's tokens.
Chat template: ChatML; end of sequence: <|im_end|>; no BOS added.

Weights: F16, uniform with each matrix's 1/sqrt(fan-in) scale; norm
weights F32 (llama.cpp's CPU kernels take no F16 norm weights).
"""
import argparse
import math
import os
import random
import struct
import sys

# name: (layers, width, heads, kv heads, feed-forward width, context length)
SIZES = {
    "tiny": (1, 64, 1, 1, 192, 8192),
    "small": (4, 256, 4, 4, 768, 8192),
    "large": (6, 384, 6, 6, 1024, 8192),
}
VOCAB = 512
SPECIAL = ["<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"]
UNK, BOS, EOS_PLAIN, IM_START, IM_END = range(5)
SPACE = "\u2581"  # SentencePiece's visible space
CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
          "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
          "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")

# GGUF value types and ggml tensor types
T_U32, T_I32, T_F32, T_BOOL, T_STR, T_ARR = 4, 5, 6, 7, 8, 9
GGML_F32, GGML_F16 = 0, 1
ALIGN = 32


def corpus_words(seed=0x6c6c616d61, n=6000):
    """The tokenizer's training text: pronounceable words of 2-8 letters
    (consonant, vowel, ...), the shape of realwl.py's text."""
    cons, vow = "bcdfghjklmnprstvwz", "aeiou"
    r = random.Random(seed)
    words = {}
    for _ in range(n):
        w = "".join(r.choice(vow if j % 2 else cons) for j in range(r.randint(2, 8)))
        words[w] = words.get(w, 0) + 1
    return words


def train_pieces(words, budget):
    """BPE over words (each with SPACE before it): the first `budget`
    tokens, single characters first, then merges in order."""
    seqs = {tuple(SPACE + w): c for w, c in words.items()}
    pieces = sorted({ch for s in seqs for ch in s})
    merges = []
    while len(pieces) + len(merges) < budget:
        pairs = {}
        for s, c in seqs.items():
            for a, b in zip(s, s[1:]):
                pairs[(a, b)] = pairs.get((a, b), 0) + c
        if not pairs:
            break
        best = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))[0]
        merged = best[0] + best[1]
        merges.append(merged)
        out = {}
        for s, c in seqs.items():
            t, i = [], 0
            while i < len(s):
                if i + 1 < len(s) and (s[i], s[i + 1]) == best:
                    t.append(merged)
                    i += 2
                else:
                    t.append(s[i])
                    i += 1
            out[tuple(t)] = out.get(tuple(t), 0) + c
        seqs = out
    return pieces, merges


def vocabulary():
    """(tokens, scores, types) of the 512-token vocabulary."""
    toks = list(SPECIAL)
    types = [2, 3, 3, 3, 3]  # unknown, control x4
    toks += ["<0x%02X>" % b for b in range(256)]
    types += [6] * 256  # byte
    pieces, merges = train_pieces(corpus_words(), VOCAB - len(toks))
    scores = [0.0] * len(toks)
    for p in pieces:  # single characters: never merged into, lowest score
        toks.append(p)
        types.append(1)
        scores.append(-1e6)
    for i, m in enumerate(merges):
        toks.append(m)
        types.append(1)
        scores.append(-float(i))
    assert len(toks) == VOCAB, len(toks)
    return toks, scores, types


class Writer:
    """A GGUF v3 file: metadata, tensor infos, then the aligned data."""

    def __init__(self):
        self.kv, self.tensors = [], []

    @staticmethod
    def s(text):
        b = text.encode()
        return struct.pack("<Q", len(b)) + b

    def add(self, key, vtype, value):
        if vtype == T_STR:
            v = self.s(value)
        elif vtype == T_U32:
            v = struct.pack("<I", value)
        elif vtype == T_F32:
            v = struct.pack("<f", value)
        elif vtype == T_BOOL:
            v = struct.pack("<?", value)
        else:
            raise ValueError(vtype)
        self.kv.append(self.s(key) + struct.pack("<I", vtype) + v)

    def add_array(self, key, etype, values):
        if etype == T_STR:
            body = b"".join(self.s(v) for v in values)
        elif etype == T_F32:
            body = struct.pack("<%df" % len(values), *values)
        elif etype == T_I32:
            body = struct.pack("<%di" % len(values), *values)
        else:
            raise ValueError(etype)
        self.kv.append(self.s(key) + struct.pack("<IIQ", T_ARR, etype, len(values)) + body)

    def tensor(self, name, dims, gtype, data):
        """dims innermost first (ggml's ne[0], ne[1], ...)."""
        self.tensors.append((name, dims, gtype, data))

    def write(self, path):
        head = [b"GGUF", struct.pack("<IQQ", 3, len(self.tensors), len(self.kv))] + self.kv
        off, infos = 0, []
        for name, dims, gtype, data in self.tensors:
            infos.append(self.s(name) + struct.pack("<I", len(dims)) +
                         struct.pack("<%dQ" % len(dims), *dims) + struct.pack("<IQ", gtype, off))
            off += len(data) + (-len(data)) % ALIGN
        head = b"".join(head + infos)
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(head + b"\0" * ((-len(head)) % ALIGN))
            for _, _, _, data in self.tensors:
                f.write(data + b"\0" * ((-len(data)) % ALIGN))
        os.replace(tmp, path)


def f16(r, n, scale):
    return struct.pack("<%de" % n, *[scale * (2.0 * r() - 1.0) for _ in range(n)])


def build(size, seed):
    layers, width, heads, kv_heads, ff, ctx = SIZES[size]
    head_dim = width // heads
    kv_width = head_dim * kv_heads
    w = Writer()
    w.add("general.architecture", T_STR, "llama")
    w.add("general.name", T_STR, "prefixgate-random-%s" % size)
    w.add("general.file_type", T_U32, 1)  # mostly F16
    w.add("general.alignment", T_U32, ALIGN)
    w.add("llama.context_length", T_U32, ctx)
    w.add("llama.embedding_length", T_U32, width)
    w.add("llama.block_count", T_U32, layers)
    w.add("llama.feed_forward_length", T_U32, ff)
    w.add("llama.rope.dimension_count", T_U32, head_dim)
    w.add("llama.attention.head_count", T_U32, heads)
    w.add("llama.attention.head_count_kv", T_U32, kv_heads)
    w.add("llama.attention.layer_norm_rms_epsilon", T_F32, 1e-5)
    w.add("llama.rope.freq_base", T_F32, 10000.0)
    w.add("llama.vocab_size", T_U32, VOCAB)
    toks, scores, types = vocabulary()
    w.add("tokenizer.ggml.model", T_STR, "llama")
    w.add_array("tokenizer.ggml.tokens", T_STR, toks)
    w.add_array("tokenizer.ggml.scores", T_F32, scores)
    w.add_array("tokenizer.ggml.token_type", T_I32, types)
    w.add("tokenizer.ggml.unknown_token_id", T_U32, UNK)
    w.add("tokenizer.ggml.bos_token_id", T_U32, BOS)
    w.add("tokenizer.ggml.eos_token_id", T_U32, IM_END)
    w.add("tokenizer.ggml.padding_token_id", T_U32, UNK)
    w.add("tokenizer.ggml.add_bos_token", T_BOOL, False)
    w.add("tokenizer.ggml.add_eos_token", T_BOOL, False)
    w.add("tokenizer.ggml.add_space_prefix", T_BOOL, False)
    w.add("tokenizer.chat_template", T_STR, CHATML)

    r = random.Random(seed * 1000003 + layers).random

    def mat(name, fan_in, fan_out):
        w.tensor(name, [fan_in, fan_out], GGML_F16,
                 f16(r, fan_in * fan_out, math.sqrt(3.0 / fan_in)))

    def norm(name):
        w.tensor(name, [width], GGML_F32, struct.pack("<%df" % width, *([1.0] * width)))

    mat("token_embd.weight", width, VOCAB)
    for i in range(layers):
        p = "blk.%d." % i
        norm(p + "attn_norm.weight")
        mat(p + "attn_q.weight", width, width)
        mat(p + "attn_k.weight", width, kv_width)
        mat(p + "attn_v.weight", width, kv_width)
        mat(p + "attn_output.weight", width, width)
        norm(p + "ffn_norm.weight")
        mat(p + "ffn_gate.weight", width, ff)
        mat(p + "ffn_up.weight", width, ff)
        mat(p + "ffn_down.weight", ff, width)
    norm("output_norm.weight")
    mat("output.weight", width, VOCAB)
    return w


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", choices=sorted(SIZES), default="small")
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=1)
    opts = ap.parse_args()
    os.makedirs(os.path.dirname(os.path.abspath(opts.out)), exist_ok=True)
    build(opts.size, opts.seed).write(opts.out)
    print("genmodel: %s (%s, %d bytes)" % (opts.out, opts.size, os.path.getsize(opts.out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
