"""The report page of a small GCN run: GCN (hidden 128) on the Flickr stand-in with NeighborLoader
fanouts [25, 10], forward/backward/optimizer phases, utilisation sampled every 20 ms, an epoch
marker per epoch and one planted full collection; writes the run, its page, and with
``--screenshot`` a PNG of the page taken by headless Chromium (the one in ``docs/figures``).

    python play/report_page.py [--out runs/report_page] [--steps 30] [--screenshot docs/figures/report_page.png]
"""

from __future__ import annotations

import argparse
import gc
import shutil
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gnnmon
from gnnmon.integrations.pyg_sampler import neighbor_loader
from play.models import GCN
from play.synthetic import FLICKR, planted_partition

GC_STEP = 15


def screenshot(page: Path, png: Path, width: int = 1280, height: int = 1500) -> None:
    """A PNG of ``page`` as headless Chromium draws it (Debian's ``chromium`` + ``chromium-driver``)."""
    from selenium import webdriver

    options = webdriver.ChromeOptions()
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 f"--window-size={width},{height}", "--hide-scrollbars"):
        options.add_argument(flag)
    options.binary_location = shutil.which("chromium") or "chromium"
    service = webdriver.ChromeService(executable_path=shutil.which("chromedriver") or "chromedriver")
    driver = webdriver.Chrome(options=options, service=service)
    try:
        driver.get(page.resolve().as_uri())
        deadline = time.monotonic() + 30
        while driver.execute_script("return document.body.getAttribute('data-ready')") != "1":
            if time.monotonic() > deadline:
                raise RuntimeError(f"{page}: the page's script did not finish in 30 s")
            time.sleep(0.05)
        png.parent.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(png))
    finally:
        driver.quit()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/report_page", help="the run's path without suffix")
    parser.add_argument("--fraction", type=float, default=0.05, help="of Flickr's nodes and edges")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--screenshot", metavar="PNG", help="also write a PNG of the page")
    args = parser.parse_args()
    torch.manual_seed(0)
    data = planted_partition(FLICKR.scaled(args.fraction))
    loader = neighbor_loader(data, [25, 10], batch_size=512, shuffle=True, input_nodes=data.train_mask)
    model = GCN(FLICKR.num_features, 128, FLICKR.num_classes)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

    @gnnmon.monitor_memory_device
    @gnnmon.cuda_timed
    def train_step(batch, i: int) -> None:
        with gnnmon.phase("forward"):
            out = model(batch.x, batch.edge_index)[: batch.batch_size]
            loss = F.cross_entropy(out, batch.y[: batch.batch_size])
        with gnnmon.phase("backward"):
            if i == GC_STEP:
                gc.collect()
            loss.backward()
        with gnnmon.phase("optimizer"):
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    step = 0
    with gnnmon.collect(out.with_suffix(".jsonl"), sample=0.02,
                        config={"model": "GCN", "hidden": 128, "fanouts": [25, 10], "fraction": args.fraction}) as run:
        for epoch in range(10**6):
            run.mark("epoch", epoch)
            for batch in loader:
                train_step(batch, step)
                step += 1
                if step == args.steps:
                    break
            if step == args.steps:
                break
    page = out.with_suffix(".html")
    what = gnnmon.Report.load(out.with_suffix(".jsonl")).export("html", page)
    print(f"wrote {what} to {page}")
    if args.screenshot:
        screenshot(page, Path(args.screenshot))
        print(f"wrote {args.screenshot}")


if __name__ == "__main__":
    main()
