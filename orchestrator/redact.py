"""Credentials never reach a log: AWS SDK loggers stay above DEBUG (their DEBUG output
carries request headers and bodies), and every log record is masked for the credential
values the environment holds before any handler sees it.

The tool itself never prints, logs or stores credentials; this guards what libraries log.
"""

from __future__ import annotations

import logging
import os

SECRET_ENV = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")
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
        secrets = [os.environ[k] for k in SECRET_ENV if len(os.environ.get(k, "")) >= 8]
        if secrets:
            text = record.getMessage()
            if any(secret in text for secret in secrets):
                for secret in secrets:
                    text = text.replace(secret, MASK)
                record.msg, record.args = text, ()
        return record

    masked.masks_credentials = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(masked)
