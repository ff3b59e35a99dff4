"""Config sections of the nlp task (``data:`` and ``model:`` in config.yaml)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from ...engine.schema import Config, DataSection, Section

MIN_BPE_VOCAB = 256 + 1  # a byte-level BPE has a symbol for each of the 256 bytes, plus <|endoftext|>


class DataConfig(DataSection):
    path: str | None = None  # null: Python's bundled pydoc text; else a UTF-8 file or a folder of .txt files
    # char: vocabulary = characters of the text; byte: 256 UTF-8 bytes; bpe: byte-level BPE
    tokenizer: Literal["char", "byte", "bpe"] = "char"
    vocab_size: int = Field(2048, gt=0)  # bpe: tokens of the BPE trained on the corpus
    tokenizer_file: str | None = None  # bpe: a Hugging Face tokenizer.json to use instead of training one
    eval_fraction: float = Field(0.1, gt=0, lt=1)  # the last tokens, held out for evaluation
    cache_dir: str | None = None  # token files and fitted tokenizers; null: <output.dir>/.cache

    @model_validator(mode="after")
    def _bpe_settings(self):
        if self.tokenizer_file and self.tokenizer != "bpe":
            raise ValueError(f"data.tokenizer_file is set but data.tokenizer={self.tokenizer!r}: "
                             "set data.tokenizer=bpe (or data.tokenizer_file=null)")
        if self.tokenizer == "bpe" and not self.tokenizer_file and self.vocab_size < MIN_BPE_VOCAB:
            raise ValueError(f"data.vocab_size={self.vocab_size} is too small for a byte-level BPE: it needs "
                             f">= {MIN_BPE_VOCAB} (256 byte symbols + <|endoftext|>)")
        return self


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
    # A checkpoint of this project (trained here, or made by convert_weights.py) to start from:
    # all its weights, and its tokenizer (the sizes above must be its own)
    pretrained: str | None = None

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
