"""The real-engine workloads (bench part "real", test_real.py, the demo):
request bodies, deterministic from a seed, in the order they are sent.

Text is pronounceable words of 2-8 letters, the kind genmodel.py's
tokenizer was trained on (about 1.9 characters a token).

chats(seed, ...): C conversations, each with its own system message and T
  turns; a turn's request carries the whole history so far, the assistant
  turns being the conversation's own drawn text (history replayed, not the
  engine's random output, so a turn's prompt starts with its previous
  turn's prompt token for token). Turns go round-robin: every
  conversation's turn 1, then every turn 2, ...
docs(seed, ...): questions about D documents, each request one document
  (uniform) and a question of its own, after a short system message that
  every request shares.
Each request: {"group": conversation or document, "turn", "body"}.
"""
import json
import random

CONS, VOW = "bcdfghjklmnprstvwz", "aeiou"
# docs' documents by default: the slots of two engines of 2 slots each (the
# bench's and the demo's fleet), so that the fleet can hold every document
# and one engine cannot
DOCUMENTS = 4


def words(rng, n):
    return " ".join("".join(rng.choice(VOW if j % 2 else CONS) for j in range(rng.randint(2, 8)))
                    for _ in range(n))


def body(messages, max_tokens, stream=True):
    b = {"model": "m", "messages": messages, "max_tokens": max_tokens, "temperature": 0,
         "ignore_eos": True, "stream": stream}
    if stream:
        b["stream_options"] = {"include_usage": True}
    return json.dumps(b)


def chats(seed, conversations=4, turns=5, system_words=180, user_words=30,
          assistant_words=60, max_tokens=16, stream=True):
    """Round-robin turns of `conversations` chats. Defaults: a system
    message of ~1,100 characters (past PrefixLength 1024: each
    conversation's key is set from its first turn), 5 turns of ~30-word
    questions and ~60-word answers: ~600 tokens at the first turn, ~1,600-
    2,100 at the last."""
    rng = random.Random(seed)
    convs = []
    for c in range(conversations):
        hist = [{"role": "system", "content": "Conversation %d. %s" % (c, words(
            rng, system_words))}]
        reqs = []
        for t in range(turns):
            hist = hist + [{"role": "user", "content": words(
                rng, max(4, int(user_words * rng.uniform(0.6, 1.4))))}]
            reqs.append({"group": "c%d" % c, "turn": t, "body": body(hist, max_tokens, stream)})
            hist = hist + [{"role": "assistant", "content": words(
                rng, max(4, int(assistant_words * rng.uniform(0.6, 1.4))))}]
        convs.append(reqs)
    return [convs[c][t] for t in range(turns) for c in range(conversations)]


def docs(seed, documents=DOCUMENTS, requests=40, doc_words=560, question_words=15, max_tokens=8,
         stream=True):
    """`requests` questions about `documents` documents of ~1,800 tokens."""
    rng = random.Random(seed)
    texts = ["Document %d.\n%s" % (d, words(rng, doc_words)) for d in range(documents)]
    out = []
    for i in range(requests):
        d = rng.randrange(documents)
        msgs = [{"role": "system", "content": "Answer from the document."},
                {"role": "user", "content": "%s\n\nQuestion %d: %s" % (
                    texts[d], i, words(rng, question_words))}]
        out.append({"group": "d%d" % d, "turn": i, "body": body(msgs, max_tokens, stream)})
    return out
