"""torchrun support: join the process group, wrap the model (DDP or FSDP2), combine sharded norms.

Under `torchrun --nproc-per-node N -m reslint probe ...` every rank builds the model from the
same seed and runs the same inputs, so the measured gradients are those of one batch and equal a
single-process run's. `--wrap ddp` wraps the model in DistributedDataParallel (gradients are
all-reduced, so every rank holds the full gradient); `--wrap fsdp` shards every block of the
stacks, then the model, with FSDP2's `fully_shard`; each rank then holds a shard of each gradient,
and the probe adds up the shards' squared norms over the ranks. A factory may also return a model
it wrapped itself. Rank 0 alone prints and writes files.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any

WRAPS = ("auto", "none", "ddp", "fsdp")


@dataclass(frozen=True)
class World:
    rank: int = 0
    size: int = 1
    local_rank: int = 0

    @property
    def distributed(self) -> bool:
        return self.size > 1

    @property
    def leader(self) -> bool:
        return self.rank == 0


def launched_world() -> World:
    """The world torchrun describes in the environment (a single process when it does not)."""
    try:
        size = int(os.environ.get("WORLD_SIZE", "1"))
        rank = int(os.environ.get("RANK", "0"))
        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    except ValueError:
        return World()
    return World(rank, size, local_rank) if size > 1 else World()


def join(world: World, device_type: str) -> bool:
    """Initialise the default process group for this world; True when this call created it."""
    import torch.distributed as dist

    if not world.distributed or dist.is_initialized():
        return False
    backend = "nccl" if device_type == "cuda" else "gloo"
    dist.init_process_group(backend=backend)
    return True


def leave(created: bool) -> None:
    if not created:
        return
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()


def current_world() -> World:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return World(dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", "0")))
    return World()


def unwrap(model: Any) -> tuple[Any, str]:
    """(the module whose parameter names the report uses, the wrapping found)."""
    from torch.nn.parallel import DistributedDataParallel

    if isinstance(model, DistributedDataParallel):
        return model.module, "ddp"
    if is_fsdp(model):
        return model, "fsdp"
    return model, "none"


def loaded(name: str) -> Any:
    """A torch.distributed module if something imported it already. Importing the FSDP and DTensor
    packages costs seconds; a model sharded with them, or a DTensor gradient, implies they are loaded."""
    return sys.modules.get(name)


def is_fsdp(model: Any) -> bool:
    fsdp = loaded("torch.distributed.fsdp")
    if fsdp is None or not hasattr(fsdp, "FSDPModule"):
        return False
    return any(isinstance(module, fsdp.FSDPModule) for module in model.modules())


def original_class(module: Any) -> type:
    """The module's own class: FSDP2's fully_shard swaps in a subclass named FSDP<Class>."""
    fsdp = loaded("torch.distributed.fsdp")
    if fsdp is None or not hasattr(fsdp, "FSDPModule"):
        return type(module)
    for klass in type(module).__mro__:
        if not issubclass(klass, fsdp.FSDPModule):
            return klass
    return type(module)


def wrap(model: Any, how: str, blocks: list[str], device: Any) -> Any:
    """Wrap for the world: DDP, or FSDP2 over each block and then the model. Returns what to call."""
    if how == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        device_ids = [device.index] if device.type == "cuda" else None
        # An unused parameter is a finding (RL604) here, not a reason to fail the pass.
        return DistributedDataParallel(model, device_ids=device_ids, find_unused_parameters=True)
    if how == "fsdp":
        import torch.distributed as dist
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        mesh = init_device_mesh(device.type, (dist.get_world_size(),))
        for name in blocks:
            fully_shard(model.get_submodule(name), mesh=mesh)
        fully_shard(model, mesh=mesh)
        return model
    return model


def sharded(tensor: Any) -> bool:
    """A DTensor sharded over a one-dimensional mesh: its norm is the root of the ranks' summed squares."""
    if not is_dtensor(tensor):
        return False
    from torch.distributed.tensor import Shard

    return tensor.device_mesh.ndim == 1 and all(isinstance(placement, Shard) for placement in tensor.placements)


def is_dtensor(tensor: Any) -> bool:
    dtensor = loaded("torch.distributed.tensor")
    return dtensor is not None and hasattr(dtensor, "DTensor") and isinstance(tensor, dtensor.DTensor)
