"""Stack images: render a Dockerfile and the code from a stack, build it once by its content
hash, push and find it."""
