"""Pre-trains bert_style.Encoder with AdamW and a cosine decay from the first step."""

import torch
import torch.nn.functional as F

from bert_style import Encoder


def main(steps=100_000, vocab_size=30522):
    model = Encoder()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=steps)
    for _ in range(steps):
        tokens = torch.randint(0, vocab_size, (8, 128))
        logits = model(tokens)
        loss = F.cross_entropy(logits.flatten(0, 1), tokens.flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()


if __name__ == "__main__":
    main()
