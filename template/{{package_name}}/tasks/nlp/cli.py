"""Sample text from a trained checkpoint of this project.

    python generate.py --prompt "The "                      # the newest run's best.ckpt
    python generate.py --checkpoint runs/<run>/best.ckpt --prompt "The " --max-new-tokens 300
    python generate.py --checkpoint runs/<run>/best.ckpt --temperature 0.8 --top-k 20 --seed 1
    python generate.py --prompt "The " --no-cache           # no key/value cache: same text, slower

The same checkpoint, prompt and --seed give the same text. The sampler is
``generate.py`` beside this module.
"""

from __future__ import annotations

import argparse
from typing import NoReturn

from ...run.cli import checkpoint_path, guarded, parser
from .generate import check_settings, sample


def main() -> NoReturn:
    p = parser("Generate text with a trained language model.", checkpoint=True)
    p.add_argument("--prompt", default="", help="text to continue (default: empty)")
    p.add_argument("--max-new-tokens", type=int, default=300, help="tokens to generate (default: %(default)s)")
    p.add_argument("--temperature", type=float, default=0.8,
                   help="< 1 sharper, > 1 more random, 0 greedy (default: %(default)s)")
    p.add_argument("--top-k", type=int, default=None, help="sample only among the k most likely tokens")
    p.add_argument("--seed", type=int, default=0, help="same seed, same text (default: %(default)s)")
    p.add_argument("--no-cache", dest="cache", action="store_false",
                   help="encode the whole context for every token instead of reusing cached keys/values "
                        "(same text, slower: for comparison)")
    args = p.parse_args()
    guarded(lambda: _generate(args))


def _generate(args: argparse.Namespace) -> None:
    check_settings(args.max_new_tokens, args.temperature, args.top_k)  # before the (slow) model load
    checkpoint = checkpoint_path(args)
    from ...deploy.inference import load_trained  # imports MindSpore: after the settings check

    trained = load_trained(checkpoint, args.overrides)
    text = sample(trained.network, trained.meta, trained.cfg.model.block_size, args.prompt,
                  args.max_new_tokens, args.temperature, args.top_k, args.seed, args.cache)
    print(args.prompt + text)
