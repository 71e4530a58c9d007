# One image for every Propius process (control plane, client daemons, job drivers); compose picks the command.
FROM python:3.11-slim

# torch's CPU wheels: the default index would pull a multi-GB CUDA build that no client here uses.
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app
# The heavy, rarely changing dependency first, so code edits rebuild only the layers below.
RUN pip install --extra-index-url "$TORCH_INDEX_URL" "torch==2.13.0"

COPY pyproject.toml README.md* ./
COPY propius propius
COPY control_plane control_plane
COPY data_plane data_plane
COPY policies policies
COPY clients clients
RUN pip install --extra-index-url "$TORCH_INDEX_URL" ".[client]"

# `propius up` keeps local state in ./propius-data; the only place under /app the runtime user may write.
# /certs, /secrets and the daemons' state directory are owned by that user too, so the compose volumes
# created from them are writable by `certs init`, the `identities` bootstrap and the daemons.
RUN useradd --create-home --uid 10001 propius \
    && mkdir -p propius-data /certs /secrets /home/propius/state \
    && chown propius propius-data /certs /secrets /home/propius/state
USER propius
EXPOSE 50051
CMD ["propius-client", "--help"]
