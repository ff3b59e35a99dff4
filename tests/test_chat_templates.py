"""Chat data as transformers tokenises it, for the template families people fine-tune: the
generated project's token ids equal ``apply_chat_template(tokenize=True)`` and its loss mask
equals transformers' ``assistant_masks`` (from the same template with ``{% generation %}`` around
each assistant turn's text and end of turn: the reference's own marking, not ours). Tiny
tokenizers carry each family's quirks: byte-level BPE (Qwen, Llama-3, SmolLM2, DeepSeek) or
SentencePiece-style Metaspace with a dummy prefix (Llama-2, Zephyr, Mistral, Gemma)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from helpers import REPO, generate

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
    "<|end_of_text|>",
    "<eos>",
    "<|end|>",
    "<|user|>",
    "<|assistant|>",
    "<|system|>",
    "<|observation|>",
    "[gMASK]",
    "<sop>",
    "<|start_of_role|>",
    "<|end_of_role|>",
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
from {package}.engine.errors import DataError
from {package}.tasks.nlp.data.conversations import chat_token_file
from {package}.tasks.nlp.data.tokenizer import Tokenizer

cases = json.loads(Path(sys.argv[1]).read_text())
out = {{}}
for name, case in cases.items():
    tokenizer = Tokenizer.from_file(case["tokenizer"])
    meta = {{"chat_template": case["template"], "special_tokens": {{"eos_token": case["eos"]}},
             "generation": {{"eos_token_ids": case.get("eos_ids", [])}}}}
    try:
        tokens = chat_token_file(case["data"], "chat", tokenizer, meta, False, Path(case["cache"]))
    except DataError as exc:
        out[name] = str(exc)
        continue
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


def transformers_ids_and_mask(reference, conversation, published: str, marked: str) -> tuple[list, list]:
    """transformers' ids of ``conversation`` under the published template, and its assistant_masks
    under the same template marked with {% generation %}, which must not change the ids."""
    ids = reference.apply_chat_template(conversation, chat_template=published, tokenize=True,
                                        return_dict=True)["input_ids"]
    want = reference.apply_chat_template(conversation, chat_template=marked, tokenize=True, return_dict=True,
                                         return_assistant_tokens_mask=True)
    assert want["input_ids"] == ids  # the marks change nothing else
    return list(ids), list(want["assistant_masks"])


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
            references[name].append(transformers_ids_and_mask(reference, conversation, published, generation))
    ours = run_ours(tmp_path, project, cases)
    for name in TEMPLATES:
        for (our_ids, our_mask), (ids, mask) in zip(ours[name], references[name], strict=True):
            assert our_ids == ids, name
            assert our_mask == mask, name
            assert sum(mask) > 0, name


# Qwen3's published template (its tools branches left out), the assistant's part marked [[ ]] as above:
# the last turn after the last user query renders <think> from reasoning_content or from the content.
QWEN3 = (
    "{%- if messages[0].role == 'system' %}"
    "{{- '<|im_start|>system\n' + messages[0].content + '<|im_end|>\n' }}"
    "{%- endif %}"
    "{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}"
    "{%- for message in messages[::-1] %}{%- set index = (messages|length - 1) - loop.index0 %}"
    "{%- if ns.multi_step_tool and message.role == 'user' and message.content is string %}"
    "{%- set ns.multi_step_tool = false %}{%- set ns.last_query_index = index %}{%- endif %}{%- endfor %}"
    "{%- for message in messages %}"
    "{%- if message.content is string %}{%- set content = message.content %}"
    "{%- else %}{%- set content = '' %}"
    "{%- endif %}"
    "{%- if (message.role == 'user') or (message.role == 'system' and not loop.first) %}"
    "{{- '<|im_start|>' + message.role + '\n' + content + '<|im_end|>' + '\n' }}"
    "{%- elif message.role == 'assistant' %}{%- set reasoning_content = '' %}"
    "{%- if message.reasoning_content is string %}{%- set reasoning_content = message.reasoning_content %}"
    "{%- else %}{%- if '</think>' in content %}"
    "{%- set reasoning_content = "
    "content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') %}"
    "{%- set content = content.split('</think>')[-1].lstrip('\n') %}{%- endif %}{%- endif %}"
    "{{- '<|im_start|>' + message.role + '\n' }}[["
    "{%- if loop.index0 > ns.last_query_index %}"
    "{%- if loop.last or (not loop.last and reasoning_content) %}"
    "{{- '<think>\n' + reasoning_content.strip('\n') + '\n</think>\n\n' + content.lstrip('\n') }}"
    "{%- else %}{{- content }}{%- endif %}"
    "{%- else %}{{- content }}{%- endif %}"
    "{{- '<|im_end|>' }}]]{{- '\n' }}"
    "{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %}"
)
REASONING = [
    [
        {"role": "user", "content": "Capital of France?"},
        {"role": "assistant", "content": "<think>\nIt is Paris.\n</think>\n\nParis."},
    ],
    [
        {"role": "user", "content": "Capital of France?"},
        {"role": "assistant", "content": "Paris.", "reasoning_content": "It is Paris."},
    ],
    CONVERSATIONS[0],  # earlier reasoning dropped, the last kept
    [{"role": "user", "content": "Name a fox."}, {"role": "assistant", "content": "A red fox."}],
]


def run_ours(tmp_path, project, cases: dict) -> dict:
    (tmp_path / "cases.json").write_text(json.dumps(cases), encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-c", OURS.format(package="chat"), str(tmp_path / "cases.json")],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def case(folder, template: str, eos: str, rows: list, stops=(), kind: str = "bpe") -> tuple[dict, object]:
    folder.mkdir()
    data = folder / "chat.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    tokenizer = tokenizer_file(folder, kind)
    reference = transformers.PreTrainedTokenizerFast(tokenizer_file=tokenizer, eos_token=eos)
    eos_ids = [reference.convert_tokens_to_ids(s) for s in stops]
    return {
        "tokenizer": tokenizer,
        "template": template,
        "data": str(data),
        "eos": eos,
        "eos_ids": eos_ids,
        "cache": str(folder / "cache"),
    }, reference


def test_qwen3_reasoning_trains_as_its_own_template_renders_it(tmp_path):
    """<think> in the final answer or in reasoning_content: ids = apply_chat_template with Qwen3's own
    template, the mask = transformers' assistant_masks of that template marked around what it renders
    for the assistant (the think block included; earlier turns' reasoning is not rendered). An
    unclosed think block is one line naming the line and the turn."""
    project = generate(tmp_path, "nlp", name="chat", git=False)
    published = QWEN3.replace("[[", "").replace("]]", "")
    marked = QWEN3.replace("[[", "{%- generation %}").replace("]]", "{%- endgeneration %}")
    rows = [{"messages": c} for c in REASONING]
    cases, reference = {}, None
    cases["qwen3"], reference = case(
        tmp_path / "qwen3", published, "<|im_end|>", rows, ["<|im_end|>", "<|endoftext|>"]
    )
    bad = [
        {
            "messages": [
                {"role": "user", "content": "Hi"},
                {"role": "assistant", "content": "<think>\nhm\n\nHello."},
            ]
        }
    ]
    cases["unclosed"], _ = case(tmp_path / "unclosed", published, "<|im_end|>", bad)
    ours = run_ours(tmp_path, project, cases)
    think = reference.convert_tokens_to_ids("<think>")
    for conversation, (our_ids, our_mask) in zip(REASONING, ours["qwen3"], strict=True):
        ids, mask = transformers_ids_and_mask(reference, conversation, published, marked)
        assert our_ids == ids
        assert our_mask == mask
        last = len(ids) - 1 - ids[::-1].index(reference.convert_tokens_to_ids("<|im_end|>"))
        assert our_mask[last] == 1  # the end of the final turn trains
        if think in ids:  # the final answer's think block trains (rendered for the last turn only)
            assert our_mask[ids.index(think)] == 1 and ids.count(think) == 1
    assert ours["unclosed"].endswith(
        "chat.jsonl:1: turn 2: a <think> block that is not closed (no </think> after it)"
    )


# One published template per family of the registry (hf/layouts), as each ends a turn, and the ids its
# generation_config.json stops at: the last target of every assistant span must be one of them.
FAMILY_TEMPLATES = {
    "llama": (TEMPLATES["llama3"][1], "<|eot_id|>", ["<|end_of_text|>", "<|eot_id|>"]),
    "qwen2": (TEMPLATES["qwen2.5"][1], "<|im_end|>", ["<|im_end|>", "<|endoftext|>"]),
    "qwen3": (QWEN3, "<|im_end|>", ["<|im_end|>", "<|endoftext|>"]),
    "mistral": (TEMPLATES["mistral-v0.3"][1], "</s>", ["</s>"]),
    "gemma2": (TEMPLATES["gemma"][1], "<eos>", ["<eos>", "<end_of_turn>"]),
    "gemma3": (TEMPLATES["gemma"][1], "<eos>", ["<eos>", "<end_of_turn>"]),
    "phi3": (
        "{% for m in messages %}<|{{ m.role }}|>\n{{ m.content }}<|end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>\n{% endif %}",
        "<|endoftext|>",
        ["<|end|>", "<|assistant|>", "<|endoftext|>"],
    ),
    "olmo2": (
        "{% for m in messages %}{% if m.role == 'user' %}<|user|>\n{{ m.content }}\n"
        "{% elif m.role == 'assistant' %}<|assistant|>\n{{ m.content + eos_token }}{% if not loop.last %}\n"
        "{% endif %}{% elif m.role == 'system' %}<|system|>\n{{ m.content }}\n{% endif %}{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>\n{% endif %}",
        "<|endoftext|>",
        ["<|endoftext|>"],
    ),
    "smollm3": (TEMPLATES["smollm2"][1], "<|im_end|>", ["<|im_end|>"]),
    # GLM-4-0414: nothing after an answer; the next role token (an eos id) ends the turn
    "glm4": (
        "[gMASK]<sop>{% for m in messages %}{% if m.role == 'system' %}<|system|>\n{{ m.content }}{% endif %}"
        "{% endfor %}{% for m in messages if m.role != 'system' %}{% if m.role == 'user' %}<|user|>\n"
        "{{ m.content }}{% elif m.role == 'assistant' %}<|assistant|>\n{{ m.content }}{% endif %}{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>{% endif %}",
        "<|endoftext|>",
        ["<|endoftext|>", "<|user|>", "<|observation|>"],
    ),
    "granite": (
        "{% for m in messages %}<|start_of_role|>{{ m.role }}<|end_of_role|>{{ m.content }}<|end_of_text|>\n"
        "{% endfor %}{% if add_generation_prompt %}<|start_of_role|>assistant<|end_of_role|>{% endif %}",
        "<|end_of_text|>",
        ["<|end_of_text|>"],
    ),
}


FAMILY_ROWS = [{"messages": c} for c in (*CONVERSATIONS, REASONING[0])]


def registry_families() -> set[str]:
    """The families of the generated project's weight registry (``hf/layouts``), read off its imports."""
    text = (
        REPO / "template" / "{{package_name}}" / "tasks" / "nlp" / "hf" / "layouts" / "__init__.py"
    ).read_text()
    return {name.strip() for name in re.search(r"^from \. import (.+)$", text, re.M).group(1).split(",")}


def test_every_family_s_assistant_spans_end_on_a_stop_token(tmp_path):
    """For each family of the registry: every contiguous run of targets ends on a token its
    generation config stops at (the model learns to stop), single-turn rows too; the ids are the
    template's (GLM-4, whose template writes no end, gets its eos appended after the last answer)."""
    assert set(FAMILY_TEMPLATES) == registry_families()
    project = generate(tmp_path, "nlp", name="chat", git=False)
    cases, references = {}, {}
    for name, (template, eos, stops) in FAMILY_TEMPLATES.items():
        published = template.replace("[[", "").replace("]]", "")
        cases[name], references[name] = case(tmp_path / name, published, eos, FAMILY_ROWS, stops)
    ours = run_ours(tmp_path, project, cases)
    for name, (_, _, stops) in FAMILY_TEMPLATES.items():
        reference = references[name]
        stop_ids = {reference.convert_tokens_to_ids(s) for s in stops}
        for row, (ids, mask) in zip(FAMILY_ROWS, ours[name], strict=True):
            theirs = reference.apply_chat_template(
                row["messages"], chat_template=cases[name]["template"], tokenize=True, return_dict=True
            )["input_ids"]
            appended = [reference.convert_tokens_to_ids(stops[0])] if name == "glm4" else []
            assert ids == theirs + appended, name
            ends = [j for j in range(len(mask)) if mask[j] and (j + 1 == len(mask) or not mask[j + 1])]
            assert len(ends) == sum(m["role"] == "assistant" for m in row["messages"]), name
            assert all(ids[j] in stop_ids for j in ends), (
                name,
                reference.convert_ids_to_tokens([ids[j] for j in ends]),
            )
