# A simulated Ascend host as it comes after Huawei's driver install: Debian bookworm with python3
# (all Ansible needs), the NPU devices, driver/firmware/CANN trees and npu-smi emulator of
# docker/sim-host/Dockerfile, but WITHOUT a Docker engine, the Docker SDK or requests. The role
# host_bootstrap installs those (molecule/bootstrap).
#
# No systemd either: the entrypoint plays a sysvinit boot (ASCEND_SIM_ENGINE=init) and starts the
# enabled /etc/init.d/docker, as init does, once the docker.io package is installed.
#
# /opt/ascend-sim/bootstrap-debs holds the offline package set for the controller's cache: the .deb
# files of docker.io, python3-docker and python3-requests with every dependency this image lacks
# (apt-get install --download-only, made at build time from deb.debian.org). molecule/bootstrap
# copies them to the controller and deletes them from the host before converging, so the test
# installs from the controller's staged set and needs no package mirror.
# Built on request (python -m ascend_sim.images build --only host-bare).
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE} AS bare

ARG DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates iproute2 procps python3 tini \
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb \
    && groupadd HwHiAiUser \
    && useradd -g HwHiAiUser -d /home/HwHiAiUser -m HwHiAiUser -s /bin/bash \
    && mkdir -p /opt/ascend-sim/src /etc/ascend-sim /usr/local/lib/python3.11/dist-packages \
    && echo /opt/ascend-sim/src > /usr/local/lib/python3.11/dist-packages/ascend-sim.pth \
    && echo 'cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid,nodev,noexec 0 0' >> /etc/fstab

FROM bare AS debs
RUN apt-get update \
    && apt-get install -y --download-only --no-install-recommends \
        docker.io python3-docker python3-requests \
    && mkdir /debs \
    && mv /var/cache/apt/archives/*.deb /debs/

FROM bare
COPY --from=debs /debs /opt/ascend-sim/bootstrap-debs
# Two facts of this sandbox, not of a real host, told to Debian's /etc/init.d/docker through its
# settings files (a real host needs neither): the outer engine caps open files at its own limit, so
# the script's `ulimit -n 1048576` cannot succeed (etc-default-docker makes its ulimit calls best
# effort; the installer keeps this file, as apt keeps an existing conffile); and /sys/fs/cgroup is
# the outer host's cgroup2 mount, listed in /etc/fstab so the script does not try to mount v1
# hierarchies on it.
COPY docker/sim-host/etc-default-docker /etc/default/docker
COPY docker/sim-host/entrypoint.sh /usr/local/bin/sim-host-entrypoint
COPY docker/sim-host/npu-smi /usr/local/bin/npu-smi
COPY src/ascend_deploy /opt/ascend-sim/src/ascend_deploy
COPY src/ascend_sim /opt/ascend-sim/src/ascend_sim

ENV ASCEND_SIM_STATE=/etc/ascend-sim/state.json
ENV ASCEND_SIM_ENGINE=init
VOLUME /var/lib/docker
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/sim-host-entrypoint"]
