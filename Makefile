# Drover's two entry points:
#   make test   install missing dependencies, build, run the tests (all but
#               the long rounds: fuzzing and the randomized chaos tests)
#   make demo   install, build, start a local cluster and run the example pipeline
# and `make test-long` for the long rounds (ctest label "long"; CI runs it
# after `make test`),
# `make build` to build everything into build/, `make deb` the Debian
# package (build/deb/drover_VERSION_ARCH.deb; packaging/), `make image` the
# OCI image (drover:VERSION in the local container storage, as root, and
# build/image/drover_VERSION.oci.tar).
BUILD_DIR ?= build
JOBS ?= $(shell nproc)
# GoogleTest binaries print only their failures (and the summary): a failed
# test's lines are then what ctest --output-on-failure shows, not hidden in
# the long list of those that passed.
export GTEST_BRIEF ?= 1

.PHONY: all deps configure build test test-long bench clean demo deb image

all: build

deps:
	@bash scripts/install-deps.sh

$(BUILD_DIR)/build.ninja:
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo

configure: $(BUILD_DIR)/build.ninja

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

test: deps
	$(MAKE) build
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) --timeout 600 -LE long

test-long: deps
	$(MAKE) build
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) --timeout 1200 -L long

demo: deps
	$(MAKE) configure
	cmake --build $(BUILD_DIR) -j $(JOBS) --target drover
	bash examples/demo.sh $(BUILD_DIR)

deb: configure
	cmake --build $(BUILD_DIR) -j $(JOBS) --target drover
	bash packaging/build-deb.sh $(BUILD_DIR) $(BUILD_DIR)/deb

image: configure
	cmake --build $(BUILD_DIR) -j $(JOBS) --target drover
	bash packaging/build-image.sh $(BUILD_DIR) $(BUILD_DIR)/image

clean:
	rm -rf $(BUILD_DIR)
