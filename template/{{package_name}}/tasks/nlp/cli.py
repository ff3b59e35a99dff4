"""Sample text from a trained checkpoint of this project.

    python generate.py --prompt "The "                      # the newest run's best.ckpt
    python generate.py --checkpoint runs/<run>/best.ckpt --prompt "The " --max-new-tokens 300
    python generate.py --checkpoint runs/<run>/best.ckpt --temperature 0.8 --top-k 20 --top-p 0.9 --seed 1
    python generate.py --checkpoint weights/qwen.ckpt --chat "What is a closure?"  # its chat template
    python generate.py --checkpoint runs/<run>/best.ckpt --chat   # a conversation, read from the terminal
    python generate.py --prompt "The " --no-cache           # no key/value cache: same text, slower
    python generate.py --checkpoint weights/qwen.ckpt --prompts prompts.txt --temperature 0  # one per line, batched

The same checkpoint, prompt and --seed give the same text; it ends at an end-of-text token (in a
chat, at the end of the assistant's turn) or after --max-new-tokens. Unset sampling flags take
an imported model's generation_config.json values, else the defaults below. ``--prompts FILE``
(one prompt per line) prints one JSON line per prompt, {"prompt", "completion"}: the text
``--prompt`` gives for it, computed ``--batch-size`` prompts at a time. The sampler is
``generate.py`` beside this module.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import NoReturn

from ...engine.errors import UserError
from ...run.cli import checkpoint_path, guarded, parser
from .generate import check_settings, complete, stream

DEFAULTS = {"temperature": 0.8, "top_k": None, "top_p": None, "repetition_penalty": 1.0}


def main() -> NoReturn:
    p = parser("Generate text with a trained language model.", checkpoint=True)
    text = p.add_mutually_exclusive_group()
    text.add_argument("--prompt", default="", help="text to continue (default: empty)")
    text.add_argument("--chat", metavar="MESSAGE", nargs="?", const="",
                      help="a user message, answered through the checkpoint's chat template; with no MESSAGE, "
                           "a conversation read from the terminal (an empty line or Ctrl-D ends it)")
    text.add_argument("--prompts", metavar="FILE", help="a UTF-8 file of prompts, one per line: one JSON line each")
    p.add_argument("--batch-size", type=int, default=8,
                   help="--prompts: prompts decoded together (default: %(default)s)")
    p.add_argument("--max-new-tokens", type=int, default=300, help="tokens to generate (default: %(default)s)")
    p.add_argument("--temperature", type=float, default=None,
                   help="< 1 sharper, > 1 more random, 0 greedy (default: the checkpoint's, else 0.8)")
    p.add_argument("--top-k", type=int, default=None, help="sample only among the k most likely tokens")
    p.add_argument("--top-p", type=float, default=None,
                   help="sample only among the fewest most likely tokens whose probabilities reach p")
    p.add_argument("--repetition-penalty", type=float, default=None,
                   help="> 1 discourages tokens already in the text, as transformers (default: the checkpoint's "
                        "generation_config.json, else 1 = off)")
    p.add_argument("--seed", type=int, default=0, help="same seed, same text (default: %(default)s)")
    p.add_argument("--no-cache", dest="cache", action="store_false",
                   help="encode the whole context for every token instead of reusing cached keys/values "
                        "(same text, slower: for comparison)")
    args = p.parse_args()
    guarded(lambda: _generate(args))


def _generate(args: argparse.Namespace) -> None:
    check_settings(args.max_new_tokens, args.temperature or 0.0, args.top_k, args.top_p,  # before the slow load
                   1.0 if args.repetition_penalty is None else args.repetition_penalty)
    prompts = read_prompts(args.prompts, args.batch_size) if args.prompts is not None else None
    checkpoint = checkpoint_path(args)
    from ...deploy.inference import load_trained  # imports MindSpore: after the settings check
    from .data.chat import render
    from .models.lora import merge

    trained = load_trained(checkpoint, args.overrides)
    merge(trained.network)  # LoRA adapters folded into their weights: plain matmuls (none: no-op)
    saved = trained.meta.get("generation", {})
    if "repetition_penalty" not in saved:  # imported before it was kept: the file as it was
        saved = {**saved, **{k: v for k, v in saved.get("original", {}).items() if k == "repetition_penalty"}}
    settings = {key: getattr(args, key) if getattr(args, key) is not None else saved.get(key, default)
                for key, default in DEFAULTS.items()}

    def answer(prompt: str, stop: tuple[str, ...] = (), rendered: bool = False) -> str:
        pieces = []
        for piece in stream(trained.network, trained.meta, trained.cfg.model.block_size, prompt, args.max_new_tokens,
                            settings["temperature"], settings["top_k"], args.seed, args.cache, settings["top_p"],
                            stop, add_special_tokens=not rendered, repetition_penalty=settings["repetition_penalty"]):
            print(piece, end="", flush=True)
            pieces.append(piece)
        print(flush=True)
        return "".join(pieces)

    if prompts is not None:
        for start in range(0, len(prompts), args.batch_size):
            batch = prompts[start:start + args.batch_size]
            texts = complete(trained.network, trained.meta, trained.cfg.model.block_size, batch, args.max_new_tokens,
                             settings["temperature"], settings["top_k"], args.seed, settings["top_p"],
                             settings["repetition_penalty"])
            for prompt, text in zip(batch, texts):
                print(json.dumps({"prompt": prompt, "completion": text}, ensure_ascii=False), flush=True)
        return
    if args.chat is None:
        print(args.prompt, end="", flush=True)
        answer(args.prompt)
        return
    stop = end_of_turn(trained.meta)
    messages = [{"role": "user", "content": args.chat or ask()}]
    while messages[-1]["content"]:
        data = trained.cfg.data  # the template (and its variables) the model was fine-tuned with
        reply = answer(render(trained.meta, messages, add_generation_prompt=True, name=data.chat_template,
                              **data.template_kwargs), stop, rendered=True)
        if args.chat:  # one message: one answer
            return
        messages += [{"role": "assistant", "content": reply}, {"role": "user", "content": ask()}]


def read_prompts(path: str, batch_size: int) -> list[str]:
    """--prompts FILE: its lines, one prompt each (a line's own trailing newline is not part of it),
    so output line i answers input line i: a blank line among them is refused; blank lines at the
    end of the file are not prompts."""
    if batch_size < 1:
        raise UserError(f"--batch-size={batch_size}: must be >= 1")
    try:
        prompts = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"--prompts {path}: cannot be read as UTF-8 text ({exc})") from None
    while prompts and not prompts[-1].strip():
        prompts.pop()
    if not prompts:
        raise UserError(f"--prompts {path}: no prompt in it (one per line)")
    if blank := next((i for i, line in enumerate(prompts, 1) if not line.strip()), None):
        raise UserError(f"--prompts {path}: line {blank} is blank; each line is one prompt (one JSON line out "
                        "per line in): remove it, or use --prompt for an empty prompt")
    return prompts


def ask() -> str:
    """The user's next message from the terminal; empty at an empty line or the end of input."""
    try:
        return input("> " if sys.stdin.isatty() else "").strip()
    except EOFError:
        return ""


def end_of_turn(meta: dict) -> tuple[str, ...]:
    """Texts that end an assistant's turn: the model's end-of-sequence token (Qwen's <|im_end|>,
    Llama-3's <|eot_id|>) as text, and ChatML's for a template that writes it (the default one)."""
    ends = {meta.get("special_tokens", {}).get("eos_token")}
    if "<|im_end|>" in (meta.get("chat_template") or ""):
        ends.add("<|im_end|>")
    return tuple(sorted(e for e in ends if isinstance(e, str) and e))
