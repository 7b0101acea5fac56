// The container labels that are the agent's only record of its kernels:
// their writer and their tolerant, versioned reader. This is the checkpoint
// format, kept apart from the API's (Kernel::ToJson, Allocation::ToJson and
// the API's request parser, model/create_request.h): the API may change its
// answers or tighten what it accepts without changing what an agent wrote
// or can read back. Every reading starts with MigrateLabels.
#pragma once

#include <nlohmann/json.hpp>

#include "model/kernel.h"
#include "common/status.h"
#include "model/container.h"
#include "model/allocation.h"

namespace slotd {

// Brings the labels of an owned container written in any earlier label
// format to the current one; the one place where old formats are read.
// Format 1 (slotd 0.1.0, no format label) -> 2: adds the format label.
// Format 2 -> 3: the request may hold max_lifetime, resources.shm, mounts and
// pull, and the deadline label may be set; a format 2 container has none of
// them, so nothing changes but the format.
// Format 3 -> 4: the request may hold resources.scratch; a format 3
// container has none, so nothing changes but the format.
// Format 4 -> 5: the request may hold stop_signal, stop_timeout, pre_stop,
// restart and health; a format 4 container has none, so nothing changes but
// the format.
// Format 5 -> 6: the request may hold a shared CPU quota; format 6 -> 7: the
// container may carry label kWarmPool (a kernel made for a warm pool; only
// such containers are written in format 7). Neither changes anything but
// the format.
// kFailedPrecondition naming the container and both formats when they were
// written by a newer slotd: this version cannot know what they mean.
Result<Labels> MigrateLabels(const Labels& labels, const std::string& container_name);

// The label format a kernel with `request` is written in: the oldest that
// holds all of it, so that an older slotd (after a downgrade) adopts every
// kernel that uses nothing it lacks, and refuses one that does by its
// format check, touching nothing. 6 for a request with a shared CPU quota,
// else 5 for one with a stop contract, a restart policy or a health check,
// else 4 for one with resources.scratch, else 3.
int LabelFormatFor(const CreateRequest& request);

// The labels a kernel's container carries (owner, ids, allocations,
// request, user labels, the format of LabelFormatFor).
Labels KernelLabels(const Kernel& kernel);

// Rebuilds a kernel from an owned container's labels and its name's restart
// count (state, exit code and holds_resources are left for the caller). kInvalidArgument names the label.
Result<Kernel> KernelFromContainer(const ContainerInfo& info);

// The request as label kRequest records it (normalised sizes, sorted maps;
// fields added after the first label format only when given, so that a
// request an older slotd recorded reads back the same).
nlohmann::json RequestLabel(const CreateRequest& request);

// The request label kRequest records, read back with no API bound: what an
// earlier agent stored under its own bounds is adopted as it is.
// kInvalidArgument names the field.
Result<CreateRequest> RequestFromLabel(const nlohmann::json& label);

// The allocation as label kAllocations records it: {"cpu":[0,1],
// "mem":268435456,"devices":{"mock":["mock0"]},"ports":[{"container":8080,
// "host":30001}],"numa_node":0}.
nlohmann::json AllocationLabel(const Allocation& allocation);

// Label kAllocations read back; a malformed one is kInvalidArgument naming
// the field. Also how other owners' records are read (foreign holders).
Result<Allocation> AllocationFromLabel(nlohmann::json label);

}  // namespace slotd
