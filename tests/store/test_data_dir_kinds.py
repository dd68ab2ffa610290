"""A data directory path that is a file or a symlink loop is said to be that, by
`store check`, `store backup` and an open: not a damaged store (STORE_CORRUPT, "restore
it from a backup"), not mkdir's "File exists", not a RuntimeError traceback."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from memlineage import cli
from memlineage.config import Config
from memlineage.store import open_store
from memlineage.store.embedded import persistence


@pytest.fixture
def paths(tmp_path: Path) -> dict[str, Path]:
    (tmp_path / "file").write_text("not a store\n")
    os.symlink(tmp_path / "loop2", tmp_path / "loop1")
    os.symlink(tmp_path / "loop1", tmp_path / "loop2")
    return {"file": tmp_path / "file", "loop": tmp_path / "loop1"}


NOT_A_DIR = "not a directory (a data directory holds lineage.sqlite3)"
LOOP = os.strerror(40)  # ELOOP: "Too many levels of symbolic links"


def test_store_check_and_backup_name_a_path_that_is_no_directory(
    paths: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases = [
        (["store", "check", str(paths["file"])], f"{paths['file']}: {NOT_A_DIR}"),
        (["store", "check", str(paths["loop"])], f"{paths['loop']}: {LOOP}"),
        (["store", "backup", str(paths["file"]), str(tmp_path / "b")], NOT_A_DIR),
        (["store", "check", "/dev/null"], f"/dev/null: {NOT_A_DIR}"),
    ]
    for argv, said in cases:
        assert cli.main(argv) == 1, argv
        err = capsys.readouterr().err
        assert err.startswith("error: ") and said in err, (argv, err)
        assert "STORE_CORRUPT" not in err and "Errno" not in err, (argv, err)
    assert not (tmp_path / "b").exists()  # nothing made for a refused source


def test_a_backup_into_a_file_names_it(paths: dict[str, Path], tmp_path: Path) -> None:
    store = open_store(f"embedded://{tmp_path / 'data'}")
    store.close()
    with pytest.raises(NotADirectoryError) as err:
        persistence.backup(tmp_path / "data", paths["file"])
    assert str(paths["file"]) in str(err.value.filename) and NOT_A_DIR in str(err.value)


@pytest.mark.parametrize("which", ["file", "loop"])
def test_opening_a_data_dir_that_is_no_directory_says_why(
    paths: dict[str, Path], which: str
) -> None:
    with pytest.raises(OSError) as err:
        open_store(Config(data_dir=str(paths[which])).store_url())
    assert err.value.strerror == (NOT_A_DIR if which == "file" else LOOP)
    assert err.value.filename == str(paths[which])
