"""A BERT-style Post-LN encoder, 24 layers deep, with BatchNorm where LayerNorm belongs."""
import torch.nn as nn


class EncoderLayer(nn.Module):
    def __init__(self, d_model=1024, n_head=16, d_ff=4096, dropout=0.1):
        super().__init__()
        self.attn = nn.MultiheadAttention(d_model, n_head, dropout=dropout, batch_first=True)
        self.norm1 = nn.LayerNorm(d_model)
        self.ffn = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))
        self.norm2 = nn.BatchNorm1d(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        x = self.norm1(x + self.dropout(self.attn(x, x, x, need_weights=False)[0]))
        x = x + self.dropout(self.ffn(x))
        return self.norm2(x.transpose(1, 2)).transpose(1, 2)


class Encoder(nn.Module):
    def __init__(self, vocab_size=30522, d_model=1024, n_layers=24):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_model)
        self.layers = nn.ModuleList([EncoderLayer(d_model) for _ in range(n_layers)])

    def forward(self, input_ids):
        x = self.embed(input_ids)
        for layer in self.layers:
            x = layer(x)
        return x
