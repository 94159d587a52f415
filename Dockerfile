# syntax=docker/dockerfile:1
# The allocating webhook image: built from Debian bookworm packages (the same ones scripts/setup
# installs), shipped as a minimal runtime with only the two binaries (allocating-webhook, the
# entry point, and allocation-gateway, which manifests/components/gateway runs as its command) and
# the shared libraries they link (their ldd closure), running as the non-root user 65532. No shell,
# no package manager at runtime.
#
#   docker build -t allocating-webhook:dev .        (BuildKit, the default since Docker 23: cache mounts)
#   scripts/image                                  (podman, no Docker or registry: README.md)
#   docker run --rm allocating-webhook:dev --help
#   docker run --rm --entrypoint /usr/local/bin/allocation-gateway allocating-webhook:dev --help

ARG DEBIAN_IMAGE=debian:bookworm

FROM ${DEBIAN_IMAGE} AS build
ARG DEBIAN_FRONTEND=noninteractive
# apt's downloaded packages and lists are cache mounts (BuildKit and podman/buildah both keep them
# between builds), so when this layer is rebuilt (a new base image, a changed package list) apt
# downloads only what changed; nothing of them lands in the layer. (No list clean-up: apt would
# delete the lock file podman keeps in the lists cache.)
RUN --mount=type=cache,id=aw-apt-archives,target=/var/cache/apt,sharing=locked \
    --mount=type=cache,id=aw-apt-lists,target=/var/lib/apt/lists,sharing=locked \
    rm -f /etc/apt/apt.conf.d/docker-clean \
 && echo 'Binary::apt::APT::Keep-Downloaded-Packages "true";' >/etc/apt/apt.conf.d/keep-downloads \
 && apt-get update -o APT::Get::List-Cleanup=0 \
 && apt-get install -y --no-install-recommends \
      build-essential cmake ninja-build pkg-config ca-certificates \
      libboost1.81-dev libssl-dev rapidjson-dev libfmt-dev \
      prometheus-cpp-dev libyaml-cpp-dev libnghttp2-dev libprotobuf-dev protobuf-compiler python3-minimal
WORKDIR /src
COPY CMakeLists.txt VERSION ./
COPY cmake/ cmake/
COPY proto/ proto/
# The layering map: CMakeLists.txt asks it which folders make up each library (python3-minimal).
COPY scripts/check-layering scripts/check-layering
COPY webhook/ webhook/
# --version and the build_info metric: the build context has no .git, so the commit and the date
# come in as build arguments (scripts/image and scripts/release pass them from git).
ARG AW_COMMIT=unknown
ARG AW_BUILD_DATE=unknown
# The CMake build tree is a cache mount too: a rebuild after a source change recompiles only what
# changed. The stripped binaries are copied out of it to /out (a cache mount is not in the layer).
RUN --mount=type=cache,id=aw-cmake-build,target=/build \
    cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DAW_BUILD_TESTS=OFF \
      -DAW_COMMIT="$AW_COMMIT" -DAW_BUILD_DATE="$AW_BUILD_DATE" \
 && cmake --build /build --target allocating-webhook allocation-gateway -j"$(nproc)" \
 && mkdir -p /out \
 && strip -o /out/allocating-webhook /build/allocating-webhook \
 && strip -o /out/allocation-gateway /build/allocation-gateway

# Assemble the runtime root (scripts/make-rootfs: the binaries, their shared-library closure
# including the dynamic loader, CA certificates, a passwd/group entry for 65532, /tmp), then prove
# it is complete by running both binaries inside it as that user.
COPY scripts/make-rootfs /usr/local/bin/make-rootfs
RUN make-rootfs /out/allocating-webhook /out/allocation-gateway /rootfs \
 && chroot --userspec=65532:65532 /rootfs /usr/local/bin/allocating-webhook --help > /dev/null \
 && chroot --userspec=65532:65532 /rootfs /usr/local/bin/allocation-gateway --help > /dev/null \
 && chroot --userspec=65532:65532 /rootfs /usr/local/bin/allocating-webhook --version

FROM scratch
COPY --from=build /rootfs/ /
USER 65532:65532
# 8443: admission (HTTPS; the gateway: allocations); 8081: /healthz, /readyz, /metrics (plain HTTP).
EXPOSE 8443 8081
ENTRYPOINT ["/usr/local/bin/allocating-webhook"]
