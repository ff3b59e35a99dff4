"""Recommend items for a user from a trained checkpoint of this project.

    python recommend.py --user 42                           # the newest run's best.ckpt
    python recommend.py --user user_0042                    # ids as the data writes them
    python recommend.py --checkpoint runs/<run>/best.ckpt --user 42
    python recommend.py --checkpoint runs/<run>/best.ckpt --user 42 --k 20 --set data.path=my/data

Prints the top-K items the user has not interacted with yet, best first, with the model's
probability and the title when the data has titles. The data the checkpoint was trained
on is read again to know what the user has seen. The ranking is
``task.recommend``.
"""

from __future__ import annotations

from ...engine.errors import UserError
from ...run.cli import checkpoint_path, guarded, parser


def integer(flag: str, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise UserError(f"{flag} {text!r}: expected an integer") from None


def main() -> None:
    p = parser("Recommend top-K items for a user.", checkpoint=True)
    p.add_argument("--user", required=True, help="user id as the data writes it (e.g. 42 or user_0042)")
    p.add_argument("--k", default="10", help="how many items (default: %(default)s)")
    args = p.parse_args()

    def run():
        user, k = args.user.strip(), integer("--k", args.k)
        if k < 1:
            raise UserError(f"--k {k}: must be at least 1")
        checkpoint = checkpoint_path(args)
        from ...deploy.inference import load_trained
        from .task import recommend

        trained = load_trained(checkpoint, args.overrides)
        rows = recommend(trained.network, trained.meta, trained.cfg, user, k)
        print(f"top {len(rows)} for user {user} (items they have not interacted with):")
        for rank, (item, title, prob) in enumerate(rows, start=1):
            print(f"{rank:>3}. item {item:<8} p={prob:.3f}  {title}")

    guarded(run)
