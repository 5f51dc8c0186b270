"""The matrix file: read with line numbers, validated into a `MatrixSpec`, every problem one
located line."""
