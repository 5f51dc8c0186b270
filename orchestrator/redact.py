"""Credentials never reach a log: AWS SDK loggers stay above DEBUG (their DEBUG output
carries request headers and bodies), and every log record is masked for the credential
values the environment holds before any handler sees it.

The tool itself never prints, logs or stores credentials; this guards what libraries log.
`names_a_credential` is the one test of "is this variable a credential", also used to keep
them out of every worker's environment (executors/environment.py).
"""

from __future__ import annotations

import logging
import os
import re

# Words that make a variable a credential wherever they stand in its name (HF_TOKEN,
# AZURE_CLIENT_SECRET, GOOGLE_APPLICATION_CREDENTIALS, SSH_AUTH_SOCK, MYSQL_PWD), whole
# words only, so that TOKENIZERS_PARALLELISM stays a setting.
CREDENTIAL_WORDS = {"TOKEN", "PASSWD", "PASSPHRASE", "CREDENTIAL", "CREDENTIALS", "APIKEY",
                    "AUTH", "PWD"}
# Credentials whatever the rest of the name: PGPASSWORD, CLIENTSECRET, WANDB_API_KEY, GHTOKEN.
CREDENTIAL_PARTS = ("PASSWORD", "SECRET")
CREDENTIAL_ENDINGS = ("_KEY", "TOKEN")
# A database URL may carry its password: the results store's too (MATRIX_BENCH_DB), so no
# worker gets it, though it starts like the tool's own settings.
# So may a private package index's (MATRIX_BENCH_INDEX_URL): no worker needs one.
CREDENTIAL_NAMES = {"AWS_ACCESS_KEY_ID", "KRB5CCNAME", "DATABASE_URL", "MATRIX_BENCH_DB",
                    "MATRIX_BENCH_INDEX_URL"}


def names_a_credential(name: str) -> bool:
    """Whether an environment variable of this name holds (or points to) a credential."""
    upper = name.upper()
    if upper == "PWD":  # the working directory
        return False
    return (upper in CREDENTIAL_NAMES or upper.endswith(CREDENTIAL_ENDINGS)
            or any(part in upper for part in CREDENTIAL_PARTS)
            or bool(set(re.split(r"[^A-Z0-9]+", upper)) & CREDENTIAL_WORDS))


SDK_LOGGERS = ("botocore", "boto3", "s3transfer", "urllib3")
MASK = "***"


def guard_logging() -> None:
    """Quiet the SDK loggers and mask credentials in every record (idempotent)."""
    for name in SDK_LOGGERS:
        logger = logging.getLogger(name)
        if logger.getEffectiveLevel() < logging.INFO:
            logger.setLevel(logging.INFO)
    factory = logging.getLogRecordFactory()
    if getattr(factory, "masks_credentials", False):
        return

    def masked(*args: object, **kwargs: object) -> logging.LogRecord:
        record = factory(*args, **kwargs)
        secrets = [value for name, value in os.environ.items()
                   if len(value) >= 8 and names_a_credential(name)]
        if secrets:
            text = record.getMessage()
            if any(secret in text for secret in secrets):
                for secret in secrets:
                    text = text.replace(secret, MASK)
                record.msg, record.args = text, ()
        return record

    masked.masks_credentials = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(masked)
