"""Secrets in the dynamic broker configs, encoded as Kafka's PasswordEncoder encodes them.

A dynamic secret (a keystore password, a JAAS configuration with passwords in it) is written to
the metadata store, which every broker and every ZooKeeper client with read access can see, so it is
stored encrypted with the brokers' shared ``password.encoder.secret`` rather than as it was sent:

    keyFactoryAlgorithm:PBKDF2WithHmacSHA512,cipherAlgorithm:AES/CBC/PKCS5Padding,keyLength:128,
    salt:<base64>,iterations:4096,encryptedPassword:<base64>,passwordLength:<n>,initializationVector:<base64>

(one line, Kafka's field names). The key is PBKDF2 of the secret over a fresh 256-byte salt; the
cipher AES in CBC mode with PKCS#5 padding, the only one strom offers (Kafka's default). Decoding
reads the algorithm, key length and iterations from the value itself, so values written with other
``password.encoder.*`` settings still decode.
"""

from __future__ import annotations

import base64
import os

from cryptography.hazmat.primitives import hashes, padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.kdf.pbkdf2 import PBKDF2HMAC

KEY_FACTORY = "PBKDF2WithHmacSHA512"
CIPHER = "AES/CBC/PKCS5Padding"
SALT_BYTES = 256
_HASHES: dict[str, type[hashes.SHA512 | hashes.SHA256 | hashes.SHA1]] = {
    "PBKDF2WithHmacSHA512": hashes.SHA512,
    "PBKDF2WithHmacSHA256": hashes.SHA256,
    "PBKDF2WithHmacSHA1": hashes.SHA1,
}


class PasswordEncoderError(ValueError):
    """A value that is not an encoded password, or one encoded with another secret."""


def _key(secret: str, salt: bytes, factory: str, key_length_bits: int, iterations: int) -> bytes:
    algorithm = _HASHES.get(factory)
    if algorithm is None:
        raise PasswordEncoderError(f"unsupported key factory algorithm {factory}")
    kdf = PBKDF2HMAC(algorithm=algorithm(), length=key_length_bits // 8, salt=salt, iterations=iterations)
    return kdf.derive(secret.encode())


class PasswordEncoder:
    def __init__(self, secret: str, key_length: int = 128, iterations: int = 4096, factory: str = KEY_FACTORY):
        self.secret = secret
        self.key_length = key_length
        self.iterations = iterations
        self.factory = factory

    def encode(self, password: str) -> str:
        salt, iv = os.urandom(SALT_BYTES), os.urandom(16)
        key = _key(self.secret, salt, self.factory, self.key_length, self.iterations)
        padder = padding.PKCS7(128).padder()
        data = padder.update(password.encode()) + padder.finalize()
        encryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).encryptor()
        encrypted = encryptor.update(data) + encryptor.finalize()
        fields = {
            "keyFactoryAlgorithm": self.factory,
            "cipherAlgorithm": CIPHER,
            "keyLength": str(self.key_length),
            "salt": base64.b64encode(salt).decode(),
            "iterations": str(self.iterations),
            "encryptedPassword": base64.b64encode(encrypted).decode(),
            "passwordLength": str(len(password)),
            "initializationVector": base64.b64encode(iv).decode(),
        }
        return ",".join(f"{name}:{value}" for name, value in fields.items())

    def decode(self, encoded: str) -> str:
        try:
            fields = dict(part.split(":", 1) for part in encoded.split(","))
            if fields.get("cipherAlgorithm") != CIPHER:
                raise PasswordEncoderError(f"unsupported cipher {fields.get('cipherAlgorithm')}")
            salt, iv = base64.b64decode(fields["salt"]), base64.b64decode(fields["initializationVector"])
            key = _key(
                self.secret, salt, fields["keyFactoryAlgorithm"], int(fields["keyLength"]), int(fields["iterations"])
            )
            decryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).decryptor()
            data = decryptor.update(base64.b64decode(fields["encryptedPassword"])) + decryptor.finalize()
            unpadder = padding.PKCS7(128).unpadder()
            password = (unpadder.update(data) + unpadder.finalize()).decode()
        except PasswordEncoderError:
            raise
        except (ValueError, KeyError) as exc:  # a wrong secret shows as bad padding or bad UTF-8
            raise PasswordEncoderError(f"not a password encoded with this secret ({exc})") from None
        if len(password) != int(fields["passwordLength"]):
            raise PasswordEncoderError("not a password encoded with this secret (length differs)")
        return password
