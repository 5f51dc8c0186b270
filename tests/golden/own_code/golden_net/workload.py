"""`golden_net`: one epoch is `steps` training steps of an MLP on synthetic data, timed by the
harness. Replace the model and the data with yours; keep the shape of `run`."""

from __future__ import annotations

from orchestrator.worker.context import Context
from orchestrator.worker.measure import TorchCudaProbe, no_sync

from .flops import flops_per_item


def run(ctx: Context) -> None:
    import torch  # inside run(): the worker imports nothing heavy before it has to
    from torch import nn

    device = torch.device(ctx.device)
    on_gpu = device.type == "cuda"
    ctx.use_framework("torch", torch.__version__,
                      sync=torch.cuda.synchronize if on_gpu else no_sync,
                      probes=[TorchCudaProbe(device)] if on_gpu else [])
    p = ctx.params
    torch.manual_seed(ctx.repeat)
    layers: list[nn.Module] = []
    width = p["features"]
    for _ in range(p["layers"]):
        layers += [nn.Linear(width, p["hidden"]), nn.ReLU()]
        width = p["hidden"]
    model = nn.Sequential(*layers, nn.Linear(width, p["classes"])).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    # the data is made before any clock starts: the timing is the model's, not the loader's
    inputs = torch.randn(p["steps"], p["batch_size"], p["features"], device=device)
    labels = torch.randint(0, p["classes"], (p["steps"], p["batch_size"]), device=device)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(p["precision"])
    assert flops_per_item(p) > 0

    for epoch in ctx.epoch_range():
        meter = ctx.start_epoch(warmup_steps=p["warmup_steps"])
        for step in range(p["steps"]):
            with meter.step(items=p["batch_size"]):  # real samples, no padding here
                with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
                    loss = nn.functional.cross_entropy(model(inputs[step]), labels[step])
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
        ctx.end_epoch(epoch, meter)
