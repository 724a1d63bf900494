#!/bin/sh
# Trains both shipped models, one after the other, exactly as weights/README.md records.
#   sh tools/train_models.sh [OUTDIR]        (default weights; logs and summaries in OUTDIR)
# Needs: apt-get install python3-torch python3-numpy python3-h5py r-cran-janeaustenr
#        (or: apt-get download r-cran-janeaustenr && dpkg-deb -x r-cran-janeaustenr_*.deb
#         /tmp/janeaustenr-deb, which tools/train_corpus.py also finds).
set -e
out=${1:-weights}
cd "$(dirname "$0")/.."
mkdir -p "$out"
/usr/bin/python3 tools/train.py --arch llama --seed 1 --out "$out/austen-llama.h5" \
    --heldout-out "$out/heldout.txt" --summary "$out/austen-llama.json" \
    2>&1 | tee "$out/austen-llama.log"
/usr/bin/python3 tools/train.py --arch gpt2 --seed 1 --out "$out/austen-gpt2.h5" \
    --summary "$out/austen-gpt2.json" 2>&1 | tee "$out/austen-gpt2.log"
