"""Config sections of the nlp task (``data:`` and ``model:`` in config.yaml)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from ...engine.schema import Config, Section


class DataConfig(Section):
    path: str | None = None  # null: Python's bundled pydoc text; else a UTF-8 file or a folder of .txt files
    tokenizer: Literal["char", "byte"] = "char"  # char: vocabulary = characters of the text; byte: 256 UTF-8 bytes
    eval_fraction: float = Field(0.1, gt=0, lt=1)  # the end of the text, held out for evaluation


class ModelConfig(Section):
    # gpt: the layers below as configured; gpt2: GPT-2's own (biases, tied head), so Hugging Face
    # GPT-2 weights import with convert_weights.py
    arch: Literal["gpt", "gpt2"] = "gpt"
    block_size: int = Field(64, gt=0)  # context length in tokens (training blocks, generation window)
    n_layer: int = Field(2, gt=0)
    n_head: int = Field(4, gt=0)
    d_model: int = Field(128, gt=0)  # must be divisible by n_head
    mlp_ratio: int = Field(4, gt=0)  # hidden width of the feed-forward block = mlp_ratio * d_model
    dropout: float = Field(0.0, ge=0, lt=1)
    tie_embeddings: bool = True  # the output layer reuses the token embedding matrix
    bias: bool = False  # bias vectors in the linear layers (false: a little faster, as good)

    @model_validator(mode="after")
    def _heads_divide_width(self):
        if self.d_model % self.n_head:
            raise ValueError(f"model.d_model={self.d_model} must be divisible by model.n_head={self.n_head}")
        if self.arch == "gpt2" and not (self.bias and self.tie_embeddings):
            raise ValueError("model.arch=gpt2 has biases and a tied head: set model.bias=true and "
                             "model.tie_embeddings=true (or model.arch=gpt)")
        return self


class TaskConfig(Config):
    data: DataConfig = DataConfig()
    model: ModelConfig = ModelConfig()
