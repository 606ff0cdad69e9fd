"""Dynamic broker config secrets, encoded as Kafka's PasswordEncoder encodes them."""

from __future__ import annotations

import pytest

from strom.security.password_encoder import PasswordEncoder, PasswordEncoderError


def test_a_secret_round_trips_and_is_not_stored_in_clear():
    encoder = PasswordEncoder("cluster-secret")
    encoded = encoder.encode("keystore-päss")
    fields = dict(part.split(":", 1) for part in encoded.split(","))
    assert fields["keyFactoryAlgorithm"] == "PBKDF2WithHmacSHA512"
    assert fields["cipherAlgorithm"] == "AES/CBC/PKCS5Padding"
    assert (fields["keyLength"], fields["iterations"], fields["passwordLength"]) == ("128", "4096", "13")
    assert "keystore" not in encoded
    assert encoder.decode(encoded) == "keystore-päss"
    assert encoder.encode("keystore-päss") != encoded  # a fresh salt and IV each time


def test_the_settings_travel_with_the_value():
    encoded = PasswordEncoder("s", key_length=256, iterations=2048, factory="PBKDF2WithHmacSHA256").encode("pw")
    assert PasswordEncoder("s").decode(encoded) == "pw"


@pytest.mark.parametrize("value", ["plain text", "keyFactoryAlgorithm:PBKDF2WithHmacSHA512,cipherAlgorithm:DES"])
def test_what_does_not_decode_is_an_error(value):
    with pytest.raises(PasswordEncoderError):
        PasswordEncoder("s").decode(value)


def test_another_secret_does_not_decode():
    with pytest.raises(PasswordEncoderError, match="not a password encoded with this secret"):
        PasswordEncoder("other").decode(PasswordEncoder("cluster-secret").encode("pw"))
