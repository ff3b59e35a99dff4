"""Search with a trained model of this project: captions for an image, or images for a caption.

    python retrieve.py --image photo.png                    # top captions, newest run's best.ckpt
    python retrieve.py --checkpoint runs/<run>/best.ckpt --image photo.png
    python retrieve.py --checkpoint runs/<run>/best.ckpt --image photo.png --captions my_captions.txt
    python retrieve.py --checkpoint runs/<run>/best.ckpt --text "a handwritten digit seven" --images pics/

Without --captions, the candidates are the captions seen in training plus one prompt per
class. Scores are cosine similarities in the shared space (higher is closer).
"""

from __future__ import annotations

from pathlib import Path

from ...engine.errors import UserError
from ...run.cli import checkpoint_path, guarded, parser


def main() -> None:
    p = parser("Rank captions for an image, or images for a caption.", checkpoint=True)
    query = p.add_mutually_exclusive_group(required=True)
    query.add_argument("--image", type=Path, help="an image file: rank captions for it")
    query.add_argument("--text", help="a caption: rank the images of --images for it")
    p.add_argument("--images", type=Path, help="folder of images to search (with --text)")
    p.add_argument("--captions", type=Path, help="candidate captions, one a line (with --image)")
    p.add_argument("--top", type=int, default=5, help="how many results (default: %(default)s)")
    args = p.parse_args()

    def run():
        if args.top < 1:
            raise UserError(f"--top {args.top}: must be at least 1")
        if args.text is not None and args.images is None:
            raise UserError("--text needs --images FOLDER (the images to search)")
        candidates = None
        if args.captions is not None:
            try:
                candidates = [line.strip() for line in args.captions.read_text(encoding="utf-8").splitlines()]
            except OSError as exc:
                raise UserError(f"--captions {args.captions}: {exc.strerror}") from None
            candidates = [c for c in candidates if c]
            if not candidates:
                raise UserError(f"--captions {args.captions}: no captions in the file")
        checkpoint = checkpoint_path(args)
        from ...deploy.inference import load_trained
        from .retrieval import captions_for_image, images_for_text

        trained = load_trained(checkpoint, args.overrides)
        if args.image is not None:
            results = captions_for_image(trained.network, trained.meta, args.image, candidates, args.top)
        else:
            results = images_for_text(trained.network, trained.meta, args.text, args.images, args.top)
        for score, item in results:
            print(f"{score:+.3f}  {item}")

    guarded(run)
