"""``strom docs``: builds the documentation site (mkdocs --strict, reference pages from the code)."""

import os

from strom.cli.main import main


def test_strom_docs_builds_the_site_with_its_generated_reference(tmp_path, capsys):
    site = tmp_path / "site"
    assert main(["docs", "--build-dir", str(site)]) == 0
    assert capsys.readouterr().out == f"strom docs: built {site / 'index.html'}\n"
    for page in ("index.html", "quickstart.html", "reference/cli.html", "reference/broker-configs.html"):
        assert os.path.exists(site / page), page
    cli = (site / "reference" / "cli.html").read_text(encoding="utf-8")
    assert "strom docs" in cli and "--build-dir" in cli
    # nothing from the network: no Google Fonts, no CDN
    index = (site / "index.html").read_text(encoding="utf-8")
    assert "fonts.googleapis.com" not in index and "cdn.jsdelivr.net" not in index and "unpkg.com" not in index


def test_strom_docs_says_when_its_port_is_taken(capsys):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["docs", "--port", str(port)]) == 1
    assert capsys.readouterr().err == f"strom docs: cannot listen on 127.0.0.1:{port}: in use\n"
