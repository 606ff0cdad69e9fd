"""python -m strom.bench.iceberg runs a real translation round and prints its figures."""

import re

from strom.bench.iceberg import main


def test_the_benchmark_translates_every_record_and_prints_its_rate(capsys):
    main(["--records", "2000"])
    out = capsys.readouterr().out
    assert re.search(r"translated 2,000 records \(.* MB of segments\) in .* s: [\d,]+ records/s", out), out
    assert "a round with nothing new:" in out and "(0 rows)" in out


def test_the_avro_benchmark_translates_typed_records_and_prints_its_rate(capsys):
    main(["--records", "2000", "--avro"])
    out = capsys.readouterr().out
    assert re.search(r"translated 2,000 10-field Avro records \(.* MB of segments\) in .* s: [\d,]+ records/s", out)
    assert "(0 rows)" in out
