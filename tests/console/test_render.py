"""How the console shows message bytes, and its charts' data (no browser needed)."""

from strom.console.render import line_chart, show_bytes, show_size


def test_json_objects_are_pretty_printed_and_text_stays_text():
    shown = show_bytes(b'{"id":1,"tags":["a"]}')
    assert (shown.kind, shown.size) == ("json", 21)
    assert shown.text == '{\n  "id": 1,\n  "tags": [\n    "a"\n  ]\n}'
    assert show_bytes("ünïcode, tabs\tand\nlines".encode()).kind == "text"
    assert show_bytes(b"42").kind == "text"  # a bare JSON number reads better as the text it is


def test_binary_and_control_bytes_are_hex_and_null_is_null():
    assert show_bytes(bytes([0, 1, 254, 255])).text == "00 01 fe ff"
    assert show_bytes(b"bell\x07").kind == "hex"
    assert show_bytes(None).kind == "null"
    big = show_bytes(b"x" * 70_000)
    assert big.kind == "text" and big.text.endswith("(70000 bytes)")


def test_sizes_and_charts():
    assert [show_size(n) for n in (None, 10, 2048, 5 * 1024**3)] == ["-", "10 B", "2.0 KiB", "5.0 GiB"]
    svg = line_chart({"lag": [(0.0, 30.0), (1.0, 20.0), (2.0, 0.0)]}, "Total lag <group>")
    assert 'data-series="lag" data-max="30"' in svg and "Total lag &lt;group&gt;" in svg
    assert "collecting samples" in line_chart({"lag": []}, "empty")
