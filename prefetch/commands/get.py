"""``prefetch get``: download datasets or URLs, resumable and verified.

The click command, made from ``get_args.OPTIONS`` (the one declaration of its options,
which ``cli.py`` also reads without click); the work is ``get_run.run_get``.
"""

from __future__ import annotations

import click

from prefetch.commands.get_args import OPTIONS
from prefetch.commands.get_run import PathPrinter, read_input_file, run_foreground, run_get  # noqa: F401

_TYPES = {"text": None, "int": int, "int>=0": click.IntRange(min=0), "int>=1": click.IntRange(min=1),
          "float>0": click.FloatRange(min=0, min_open=True), "path": click.Path(),
          "dir": click.Path(file_okay=False), "file": click.Path(dir_okay=False)}


def _command(function):
    for decls, param, kind, multiple, metavar, help_text in reversed(OPTIONS):
        extra = {"is_flag": True} if kind is None and "/" not in decls[0] else {}
        if param == "nice":
            extra = {"default": None}
        if _TYPES.get(kind) is not None:
            extra["type"] = _TYPES[kind]
        if multiple:
            extra["multiple"] = True
        if metavar:
            extra["metavar"] = metavar
        function = click.option(*decls, param, help=help_text, **extra)(function)
    function = click.argument("names", nargs=-1, metavar="NAME|URL...")(function)
    return click.command()(function)


@_command
def get(**params):
    """Download datasets (cifar10, mnist, ...) or URLs into the Keras cache, and
    Hugging Face repos (hf://ORG/NAME, hf://datasets/ORG/NAME) into the Hugging Face cache;
    torchvision datasets (torchvision:CIFAR10) under --root and weights (torchvision:resnet50)
    into torch.hub's cache; ModelScope repos (ms://ORG/NAME, ms://datasets/ORG/NAME) into
    ModelScope's cache; NLTK packages and collections (nltk:punkt_tab, nltk:popular) into
    NLTK's data dir.

    \b
    Examples (in a notebook cell):
      !prefetch get mnist cifar10
      !prefetch get cifar10 imdb -b
      !prefetch get cifar10 --mirror http://10.0.0.5/datasets/
      !prefetch get cifar10 --seed s3://team-bucket/keras-datasets
      !prefetch get https://example.org/file.zip -o data/file.zip --sha256 HEX
      !prefetch get https://example.org/file.zip -o data/     # data/file.zip
      !prefetch get -i urls.txt -P data/ --limit-rate 2M
      !prefetch get https://osf.io/abcd/download --content-disposition -P data/
      !prefetch get https://example.org/a.tar.gz#sha256=HEX --extract -P data/
      !prefetch get hf://Qwen/Qwen2.5-0.5B -b --mirror hf-mirror
      !prefetch get hf://Qwen/Qwen2.5-0.5B --lfs-from ms://Qwen/Qwen2.5-0.5B -b
      !prefetch get torchvision:CIFAR10 --root ./data -b   # then CIFAR10("./data", download=True)
      !prefetch get torchvision:resnet50                  # then resnet50(weights="DEFAULT")
      prefetch get -i shards.txt -P shards/ --print-paths | xargs -n1 python train_on.py
    """
    return run_get(**params)
