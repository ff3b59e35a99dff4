"""Chat data as transformers tokenises it, for the template families people fine-tune: the
generated project's token ids equal ``apply_chat_template(tokenize=True)`` and its loss mask
equals transformers' ``assistant_masks`` (from the same template with ``{% generation %}`` around
each assistant turn's text and end of turn: the reference's own marking, not ours). Tiny
tokenizers carry each family's quirks: byte-level BPE (Qwen, Llama-3, SmolLM2, DeepSeek) or
SentencePiece-style Metaspace with a dummy prefix (Llama-2, Zephyr, Mistral, Gemma)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from helpers import generate

transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

# [[ and ]] mark the assistant's part: "" in the published template, {% generation %} in the reference's.
CHATML = (
    "{% for m in messages %}{% if m.role == 'assistant' %}"
    "<|im_start|>assistant\n[[{{ m.content }}<|im_end|>]]\n"
    "{% else %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
TEMPLATES = {
    # Qwen2.5: a default system turn when the conversation has none
    "qwen2.5": (
        "bpe",
        "{% if messages[0].role != 'system' %}<|im_start|>system\nYou are Qwen.<|im_end|>\n{% endif %}"
        + CHATML,
    ),
    # SmolLM2: ChatML with its own default system
    "smollm2": (
        "bpe",
        "{% if messages[0].role != 'system' %}<|im_start|>system\nYou are SmolLM.<|im_end|>\n{% endif %}"
        + CHATML,
    ),
    # Llama-3.1/3.2: a system header with today's date (strftime_now)
    "llama3": (
        "bpe",
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nToday Date: "
        "{{ strftime_now('%d %b %Y') }}\n\n{% if messages[0].role == 'system' %}{{ messages[0].content }}"
        "{% endif %}<|eot_id|>{% for m in messages %}{% if m.role != 'system' %}<|start_header_id|>"
        "{{ m.role }}<|end_header_id|>\n\n{% if m.role == 'assistant' %}[[{{ m.content | trim }}<|eot_id|>]]"
        "{% else %}{{ m.content | trim }}<|eot_id|>{% endif %}{% endif %}{% endfor %}"
        "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}",
    ),
    # Qwen3: earlier turns lose their reasoning (not prefix-stable), the last keeps it
    "qwen3": (
        "bpe",
        "{% for m in messages %}{% if m.role == 'assistant' %}{% set c = m.content %}"
        "{% if not loop.last and '</think>' in c %}"
        "{% set c = c.split('</think>')[-1].lstrip('\\n') %}{% endif %}"
        "<|im_start|>assistant\n[[{{ c }}<|im_end|>]]\n{% else %}<|im_start|>{{ m.role }}\n{{ m.content }}"
        "<|im_end|>\n{% endif %}{% endfor %}",
    ),
    # DeepSeek-R1-Distill: reasoning dropped from every turn, a generation prompt ending in <think>
    "deepseek-r1": (
        "bpe",
        "<｜begin▁of▁sentence｜>{% for m in messages %}{% if m.role == 'user' %}<｜User｜>"
        "{{ m.content }}{% elif m.role == 'assistant' %}{% set c = m.content.split('</think>')[-1] %}"
        "<｜Assistant｜>[[{{ c }}<｜end▁of▁sentence｜>]]{% endif %}{% endfor %}"
        "{% if add_generation_prompt %}<｜Assistant｜><think>\\n{% endif %}",
    ),
    # Mistral v0.3: the system text moves into the last user turn (not prefix-stable)
    "mistral-v0.3": (
        "sp",
        "<s>{% set system = messages[0].content if messages[0].role == 'system' else '' %}"
        "{% for m in messages %}{% if m.role == 'user' %}{% if loop.last or loop.revindex0 == 1 %}"
        "[INST] {{ (system + '\\n\\n' if system else '') + m.content }}[/INST]{% else %}"
        "[INST] {{ m.content }}[/INST]{% endif %}{% elif m.role == 'assistant' %}"
        " [[{{ m.content }}</s>]]{% endif %}{% endfor %}",
    ),
    # Llama-2 / Zephyr-style SentencePiece: the dummy prefix is added once, at the start
    "llama2": (
        "sp",
        "{% for m in messages %}{% if m.role == 'user' %}<s>[INST] {{ m.content }} [/INST]"
        "{% elif m.role == 'assistant' %} [[{{ m.content }} </s>]]{% endif %}{% endfor %}",
    ),
    # Gemma: no system role, "model" turns
    # A TRL-style template that marks the assistant's text itself: its {% generation %} blocks are the mask
    "chatml-generation": ("bpe", CHATML),
    "gemma": (
        "sp",
        "<bos>{% for m in messages %}{% set role = 'model' if m.role == 'assistant' else m.role %}"
        "<start_of_turn>{{ role }}\n{% if role == 'model' %}[[{{ m.content }}<end_of_turn>]]\n{% else %}"
        "{{ m.content }}<end_of_turn>\n{% endif %}{% endfor %}",
    ),
}
SPECIALS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|begin_of_text|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|eot_id|>",
    "<｜begin▁of▁sentence｜>",
    "<｜User｜>",
    "<｜Assistant｜>",
    "<｜end▁of▁sentence｜>",
    "<s>",
    "</s>",
    "[INST]",
    "[/INST]",
    "<bos>",
    "<start_of_turn>",
    "<end_of_turn>",
    "<think>",
    "</think>",
]
CONVERSATIONS = [
    [
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": "What is 2 + 2?"},
        {"role": "assistant", "content": "<think>\nsmall sum\n</think>\n\nIt is 4."},
        {"role": "user", "content": "And 3 + 3?"},
        {"role": "assistant", "content": "<think>\nagain\n</think>\n\n6, of course."},
    ],
    [
        {"role": "user", "content": "Name a fox."},
        {"role": "assistant", "content": "\nA red fox, quick and brown."},
        {"role": "user", "content": "Where does it live?"},
        {"role": "assistant", "content": "In woods and fields."},
    ],
]


def tokenizer_file(folder, kind: str) -> str:
    """A tiny tokenizer.json: byte-level BPE, or SentencePiece-style (Metaspace, prepend_scheme first)."""
    if kind == "bpe":
        bpe = tokenizers.Tokenizer(tokenizers.models.BPE())
        bpe.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
        bpe.decoder = tokenizers.decoders.ByteLevel()
        trainer = tokenizers.trainers.BpeTrainer(
            vocab_size=400,
            special_tokens=SPECIALS,
            initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet(),
        )
    else:
        bpe = tokenizers.Tokenizer(tokenizers.models.BPE(unk_token="<unk>", byte_fallback=True))
        bpe.pre_tokenizer = tokenizers.pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")
        bpe.decoder = tokenizers.decoders.Metaspace(replacement="▁", prepend_scheme="first")
        trainer = tokenizers.trainers.BpeTrainer(
            vocab_size=400,
            special_tokens=["<unk>", *SPECIALS],
            initial_alphabet=list("abcdefghijklmnopqrstuvwxyz▁\n"),
        )
    text = [m["content"] for c in CONVERSATIONS for m in c] * 20
    bpe.train_from_iterator(text, trainer=trainer)
    path = folder / "tokenizer.json"
    bpe.save(str(path))
    return str(path)


OURS = """
import json, sys
from pathlib import Path
import numpy as np
from {package}.tasks.nlp.data.conversations import chat_token_file
from {package}.tasks.nlp.data.tokenizer import Tokenizer

cases = json.loads(Path(sys.argv[1]).read_text())
out = {{}}
for name, case in cases.items():
    tokenizer = Tokenizer.from_file(case["tokenizer"])
    meta = {{"chat_template": case["template"], "special_tokens": {{"eos_token": case["eos"]}}}}
    tokens = chat_token_file(case["data"], "chat", tokenizer, meta, False, Path(case["cache"]))
    starts = np.load(tokens.folder / "starts.npy")
    ids, mask = tokens.tokens(), tokens.mask()
    out[name] = [[ids[a:b].tolist(), mask[a:b].tolist()] for a, b in zip(starts[:-1], starts[1:])]
print(json.dumps(out))
"""
EOS = {
    "llama3": "<|eot_id|>",
    "deepseek-r1": "<｜end▁of▁sentence｜>",
    "mistral-v0.3": "</s>",
    "llama2": "</s>",
    "gemma": "<end_of_turn>",
}


def test_chat_ids_and_masks_are_transformers_for_every_template_family(tmp_path):
    project = generate(tmp_path, "nlp", name="chat", git=False)
    cases, references = {}, {}
    for name, (kind, marked) in TEMPLATES.items():
        folder = tmp_path / name
        folder.mkdir()
        # +: neither lstrip_blocks nor trim_blocks touches the text around the marks
        generation = marked.replace("[[", "{%+ generation +%}").replace("]]", "{%+ endgeneration +%}")
        published = generation if name.endswith("generation") else marked.replace("[[", "").replace("]]", "")
        data = folder / "chat.jsonl"
        data.write_text("".join(json.dumps({"messages": c}) + "\n" for c in CONVERSATIONS), encoding="utf-8")
        cases[name] = {
            "tokenizer": tokenizer_file(folder, kind),
            "template": published,
            "data": str(data),
            "eos": EOS.get(name, "<|im_end|>"),
            "cache": str(folder / "cache"),
        }
        reference = transformers.PreTrainedTokenizerFast(tokenizer_file=cases[name]["tokenizer"])
        references[name] = []
        for conversation in CONVERSATIONS:
            ids = reference.apply_chat_template(
                conversation, chat_template=published, tokenize=True, return_dict=True
            )["input_ids"]
            marked_ids = reference.apply_chat_template(
                conversation,
                chat_template=generation,
                tokenize=True,
                return_dict=True,
                return_assistant_tokens_mask=True,
            )
            assert marked_ids["input_ids"] == ids  # the marks change nothing else
            references[name].append([list(ids), list(marked_ids["assistant_masks"])])
    (tmp_path / "cases.json").write_text(json.dumps(cases), encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-c", OURS.format(package="chat"), str(tmp_path / "cases.json")],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    ours = json.loads(result.stdout.strip().splitlines()[-1])
    for name in TEMPLATES:
        for (our_ids, our_mask), (ids, mask) in zip(ours[name], references[name], strict=True):
            assert our_ids == ids, name
            assert our_mask == mask, name
            assert sum(mask) > 0, name
