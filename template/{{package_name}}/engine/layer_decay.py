"""Layer-wise learning-rate decay for fine-tuning (``optim.layer_decay``; BEiT, timm): layer i of L
(0 = stem, L = head, from ``Model.layer_id``) learns at ``lr * layer_decay^(L - i)``.
"""

from __future__ import annotations

from .errors import ConfigError
from .schema import Optim


def layer_scales(cfg: Optim, model, task: str) -> dict[str, float]:
    """Each parameter's lr factor (by ``Parameter.name``), decay^(L - its layer)."""
    if model.layer_id is None:
        raise ConfigError(f"optim.layer_decay={cfg.layer_decay}: this {task} configuration's network has no "
                          "layer map (your own: give it layer_id(name) -> layer and num_layers); set "
                          "optim.layer_decay to null")
    scales = {}
    for name, param in model.network.parameters_and_names():  # names as the network sees them
        layer = model.layer_id(name)
        if not 0 <= layer <= model.num_layers:
            raise ValueError(f"layer_id({name!r}) = {layer}, outside 0..{model.num_layers}")
        scales[param.name] = cfg.layer_decay ** (model.num_layers - layer)
    return scales
