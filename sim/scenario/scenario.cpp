#include "sim/scenario/scenario.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include "sim/collectives/nccl/collective.hpp"
#include "sim/collectives/nccl/nccl.hpp"
#include "sim/collectives/ring_allreduce.hpp"
#include "sim/engine/workload_params.hpp"
#include "sim/fabric/gpu_selection.hpp"
#include "sim/network/fluid_network.hpp"
#include "sim/network/registry.hpp"
#include "sim/scenario/calibration.hpp"
#include "sim/scenario/events.hpp"
#include "sim/scenario/jobs.hpp"
#include "sim/scenario/study.hpp"
#include "sim/scenario/yaml_source.hpp"
#include "sim/topology/builders.hpp"
#include "sim/topology/node_interior.hpp"
#include "sim/topology/topology.hpp"
#include "sim/training/training.hpp"
#include "sim/workload/flow_list.hpp"
#include "sim/workload/patterns.hpp"

namespace rocesim::scenario {
namespace {

constexpr Param kOutputParams[] = {
    {.key = "max_flows",
     .type = ParamType::Integer,
     .fallback = "1000000",
     .help = "flow records kept for results.h5 (the first ones delivered); all flows still count "
             "in the statistics. A run that writes neither results.h5 nor a trace keeps none",
     .check = Check::NonNegative,
     .max = 1000000000},
    {.key = "compression",
     .type = ParamType::Integer,
     .fallback = "0",
     .help = "deflate level 0-9 for the large tables of results.h5 (0: none, fastest)",
     .check = Check::NonNegative},
};
const ParamTable kOutputTable{"output", "What results.h5 keeps and how.", kOutputParams};

constexpr Param kScenarioParams[] = {
    {.key = "name",
     .type = ParamType::String,
     .help = "scenario name (default: the file name without extension)",
     .optional = true},
    {.key = "seed",
     .type = ParamType::Integer,
     .fallback = "1",
     .help = "seed of every random stream (QP numbers, hash seeds, generated patterns)",
     .check = Check::NonNegative},
    {.key = "topology",
     .type = ParamType::Any,
     .help = "the fabric: a topology mapping, or the path of a topology file (relative to the "
             "scenario, also when --set or a study names it)",
     .choices = "mapping or file name"},
    {.key = "routing",
     .type = ParamType::Section,
     .fallback = "{}",
     .help = "routing scheme and its parameters",
     .choices = "see the routing schemes"},
    {.key = "network",
     .type = ParamType::Section,
     .fallback = "{}",
     .help = "bandwidth-sharing model",
     .choices = "see network"},
    {.key = "workloads",
     .type = ParamType::List,
     .help = "traffic to simulate; `rocesim run` needs at least one; `{include: FILE}` "
             "items take a file's",
     .choices = "see the workload types",
     .optional = true},
    {.key = "events",
     .type = ParamType::List,
     .help = "links and switches that go down, come back or change speed during the run",
     .choices = "see events item",
     .optional = true},
    {.key = "nccl",
     .type = ParamType::Section,
     .fallback = "{}",
     .help = "NCCL settings of the job (NCCL_* variables) and the NCCL model's parameters",
     .choices = "see nccl"},
    {.key = "job",
     .type = ParamType::Section,
     .fallback = "{}",
     .help = "the job: its GPUs form the communicator of `rocesim nccl-tests` and "
             "`rocesim validate`",
     .choices = "see job"},
    {.key = "jobs",
     .type = ParamType::List,
     .help = "more jobs on the fabric, each with its placement, after `job`",
     .choices = "see jobs item",
     .optional = true},
    {.key = "output",
     .type = ParamType::Section,
     .fallback = "{}",
     .help = "results.h5 contents",
     .choices = "see output"},
    {.key = "calibration",
     .type = ParamType::Any,
     .help = "calibration files (see calibration file), relative to the scenario; their "
             "parameters replace the scenario's values, later files winning",
     .choices = "file name or list of file names",
     .optional = true},
};

const ParamTable kScenarioTable{"scenario", "The top level of a scenario file.", kScenarioParams};

/// `over`'s keys written onto `base`, mapping into mapping.
void overlay(ConfigNode& base, const ConfigNode& over) {
  for (const auto& e : over.entries()) {
    const ConfigNode* b = base.find(e.key);
    if (b != nullptr && b->is_map() && e.value.is_map()) {
      ConfigNode merged = *b;
      overlay(merged, e.value);
      base.set(e.key, e.key_where, std::move(merged));
    } else {
      base.set(e.key, e.key_where, e.value);
    }
  }
}

/// A file named by a workload key, relative to `base_dir`: its root, or the value of its only
/// key when that key is `unwrap`.
ConfigNode load_named_file(const ConfigNode& value, const std::string& base_dir,
                           std::string_view unwrap, const std::string& root_path = "") {
  std::filesystem::path p(value.value());
  if (p.is_relative()) p = std::filesystem::path(base_dir) / p;
  ConfigNode root = load_yaml_file(p.string(), root_path, &value);
  if (root.is_map() && root.entries().size() == 1 && root.find(unwrap) != nullptr) {
    return *root.find(unwrap);
  }
  if (!root.is_map()) {
    throw InputError(root.where(), root.path(), "a mapping", root.describe());
  }
  return root;
}

/// A training workload's model and DeepSpeed configuration, files read.
training::TrainingSources training_sources(const ParamReader& spec, const std::string& base_dir) {
  training::TrainingSources src;
  const ConfigNode& model = spec.node("model");
  if (model.is_scalar()) {
    src.model = load_named_file(model, base_dir, "model");
  } else if (model.is_map()) {
    src.model = model;
  } else {
    throw InputError(model.where(), model.path(), "a model mapping or the path of a model file",
                     model.describe());
  }
  const ConfigNode ds = spec.value("deepspeed");
  if (ds.is_scalar()) {
    src.deepspeed = load_named_file(ds, base_dir, "", ds.path());
  } else if (ds.is_map()) {
    const ConfigNode* file = ds.find("file");
    if (file != nullptr) {
      if (!file->is_scalar()) {
        throw InputError(file->where(), file->path(), "the path of a ds_config.json",
                         file->describe());
      }
      src.deepspeed = load_named_file(*file, base_dir, "", ds.path());
      ConfigNode rest = ConfigNode::map(ds.where(), ds.path());
      for (const auto& e : ds.entries()) {
        if (e.key != "file") rest.set(e.key, e.key_where, e.value);
      }
      overlay(src.deepspeed, rest);
    } else {
      src.deepspeed = ds;
    }
  } else {
    throw InputError(ds.where(), ds.path(), "a DeepSpeed configuration file or mapping",
                     ds.describe());
  }
  return src;
}

struct WorkloadKind {
  std::string_view type;
  const ParamTable* table;
  std::unique_ptr<engine::Workload> (*make)(const engine::WorkloadInput&, const ScenarioRun&);
};

std::span<const WorkloadKind> workload_kinds() {
  static const WorkloadKind kinds[] = {
      {"flows", &workload::kFlowListTable,
       [](const engine::WorkloadInput& in, const ScenarioRun&) {
         return workload::make_flow_list(in);
       }},
      {"permutation", &workload::kPermutationTable,
       [](const engine::WorkloadInput& in, const ScenarioRun&) {
         return workload::make_permutation(in);
       }},
      {"incast", &workload::kIncastTable,
       [](const engine::WorkloadInput& in, const ScenarioRun&) {
         return workload::make_incast(in);
       }},
      {"all_to_all", &workload::kAllToAllTable,
       [](const engine::WorkloadInput& in, const ScenarioRun&) {
         return workload::make_all_to_all(in);
       }},
      {"ring_step", &workload::kRingStepTable,
       [](const engine::WorkloadInput& in, const ScenarioRun&) {
         return workload::make_ring_step(in);
       }},
      {"ring_allreduce", &collectives::kRingAllReduceTable,
       [](const engine::WorkloadInput& in, const ScenarioRun&) {
         return collectives::make_ring_allreduce(in);
       }},
      {"nccl", &collectives::nccl::kNcclWorkloadTable,
       [](const engine::WorkloadInput& in, const ScenarioRun& run) {
         return collectives::nccl::make_nccl_workload(in, run.nccl);
       }},
      {"training", &training::kTrainingWorkloadTable,
       [](const engine::WorkloadInput& in, const ScenarioRun& run) {
         return training::make_training_workload(in, run.nccl,
                                                 training_sources(in.spec, in.base_dir));
       }},
  };
  return kinds;
}

/// The topology mapping: inline, or loaded from the named file (whose root is either the
/// topology mapping itself or a mapping with a single `topology` key).
ConfigNode resolve_topology(const ConfigNode& value, const std::string& base_dir) {
  if (value.is_map()) return value;
  if (!value.is_scalar()) {
    throw InputError(value.where(), value.path(),
                     "a topology mapping or the path of a topology file", value.describe());
  }
  std::filesystem::path p(value.value());
  if (p.is_relative()) p = std::filesystem::path(base_dir) / p;
  const ConfigNode root = load_yaml_file(p.string(), "", &value);
  if (root.is_map() && root.entries().size() == 1 && root.find("topology") != nullptr) {
    return *root.find("topology");  // its paths already start at "topology"
  }
  return load_yaml_file(p.string(), value.path(), &value);
}

/// The workloads of a scenario with every `include` item replaced by the workloads of its file
/// (relative to `base_dir`): a workload mapping, a list of them, or a mapping whose only key is
/// `workloads`. Keys written beside `include` replace those of each included workload (`name`
/// only when the file holds one). Items keep their files' locations and take their place's path,
/// so errors point into the included file and `--set workloads[3].bytes` reaches them.
ConfigNode expand_workload_includes(const ConfigNode& list, const std::string& base_dir) {
  if (!list.is_sequence()) return list;
  ConfigNode out = ConfigNode::sequence(list.where(), list.path());
  for (const ConfigNode& item : list.items()) {
    const ConfigNode* include = item.is_map() ? item.find("include") : nullptr;
    std::vector<ConfigNode> found;
    if (include == nullptr) {
      found.push_back(item);
    } else {
      if (!include->is_scalar() || include->value().empty()) {
        throw InputError(include->where(), include->path(), "the path of a workload file",
                         include->describe());
      }
      std::filesystem::path p(include->value());
      if (p.is_relative()) p = std::filesystem::path(base_dir) / p;
      const ConfigNode root = load_yaml_file(p.string(), include->path(), include);
      const ConfigNode* listed =
          root.is_map() && root.entries().size() == 1 ? root.find("workloads") : nullptr;
      const ConfigNode& body = listed != nullptr ? *listed : root;
      if (body.is_sequence()) {
        found = body.items();
      } else if (body.is_map()) {
        found.push_back(body);
      } else {
        throw InputError(body.where(), body.path(),
                         "a workload mapping, a list of workloads or a `workloads` list",
                         body.describe());
      }
      for (ConfigNode& w : found) {
        if (!w.is_map()) continue;  // reported with its location when the workload is read
        for (const ConfigNode::Entry& e : item.entries()) {
          if (e.key == "include") continue;
          if (e.key == "name" && found.size() > 1) {
            throw InputError(e.key_where, config_path(item.path(), "name"),
                             "no `name` beside an include of several workloads (each has its own)",
                             fmt::format("{} workloads in '{}'", found.size(), p.string()));
          }
          w.set(e.key, e.key_where, e.value);
        }
      }
    }
    for (ConfigNode& w : found) {
      out.append(w.rebased(fmt::format("{}[{}]", list.path(), out.items().size())));
    }
  }
  return out;
}

/// The directory of hardware presets (topologies/hardware).
std::filesystem::path hardware_dir() {
  if (const char* env = std::getenv("ROCESIM_HARDWARE_DIR"); env != nullptr && *env != 0) {
    return env;
  }
  return ROCESIM_HARDWARE_DIR;
}

/// A preset file's mapping, named by `value` (`kind`: "servers" or "nics"): a bare name in the
/// hardware directory, or a path relative to the scenario.
ConfigNode load_preset(const ConfigNode& value, const std::string& kind,
                       const std::string& base_dir, const std::string& node_path) {
  if (!value.is_scalar() || value.value().empty()) {
    throw InputError(value.where(), value.path(), "the name or path of a hardware preset",
                     value.describe());
  }
  const std::string& name = value.value();
  const bool is_path = name.find('/') != std::string::npos || name.ends_with(".yaml");
  std::filesystem::path p =
      is_path ? std::filesystem::path(name) : hardware_dir() / kind / (name + ".yaml");
  if (is_path && p.is_relative()) p = std::filesystem::path(base_dir) / p;
  if (!std::filesystem::is_regular_file(p)) {
    std::string known;
    const std::filesystem::path dir = hardware_dir() / kind;
    if (std::filesystem::is_directory(dir)) {
      std::vector<std::string> names;
      for (const auto& e : std::filesystem::directory_iterator(dir)) {
        if (e.path().extension() == ".yaml") names.push_back(e.path().stem().string());
      }
      std::sort(names.begin(), names.end());
      for (const std::string& n : names)
        known += (known.empty() ? "" : ", ") + n;
    }
    const char* what = kind == "servers" ? "server" : kind == "nics" ? "NIC" : "switch";
    throw InputError(
        value.where(), value.path(),
        fmt::format("a {} preset ({})", what,
                    known.empty() ? "none found in " + dir.string() : known),
        fmt::format("'{}' ({} {})", name, p.string(),
                    std::filesystem::is_directory(p) ? "is a directory" : "does not exist"));
  }
  const ConfigNode preset = load_yaml_file(p.string(), node_path, &value);
  if (!preset.is_map()) {
    throw InputError(preset.where(), node_path, "a mapping of node keys", preset.describe());
  }
  // A server preset may name its NIC; nothing else nests.
  for (const char* key : {"server", "nic", "switch"}) {
    const ConfigNode* nested = preset.find(key);
    if (nested != nullptr && (kind != "servers" || std::string_view(key) != "nic")) {
      throw InputError(nested->where(), nested->path(), "node keys, not another preset",
                       nested->describe());
    }
  }
  return preset;
}

/// The topology with its `node` section's presets applied: the NIC preset's keys, then the
/// server preset's, then the keys written in the section, each later one winning.
/// A switch section (`leaf`, `spine`, ...) with its `switch` preset's keys under the keys
/// written in it.
ConfigNode apply_switch_preset(const ConfigNode& section, const std::string& base_dir) {
  const ConfigNode* name = section.is_map() ? section.find("switch") : nullptr;
  if (name == nullptr) return section;
  const ConfigNode preset = load_preset(*name, "switches", base_dir, section.path());
  ConfigNode merged = ConfigNode::map(section.where(), section.path());
  for (const ConfigNode::Entry& e : preset.entries())
    merged.set(e.key, e.key_where, e.value);
  for (const ConfigNode::Entry& e : section.entries())
    merged.set(e.key, e.key_where, e.value);
  return merged;
}

ConfigNode apply_hardware_presets(const ConfigNode& topology_in, const std::string& base_dir) {
  ConfigNode topology = topology_in;
  if (topology.is_map()) {
    for (const char* key : {"leaf", "spine", "aggregation"}) {
      if (const ConfigNode* s = topology.find(key)) {
        topology.set(key, topology.key_where(key), apply_switch_preset(*s, base_dir));
      }
    }
  }
  const ConfigNode* node = topology.is_map() ? topology.find("node") : nullptr;
  if (node == nullptr || !node->is_map()) return topology;
  const ConfigNode* server = node->find("server");
  const ConfigNode* nic = node->find("nic");
  if (server == nullptr && nic == nullptr) return topology;
  ConfigNode merged = ConfigNode::map(node->where(), node->path());
  std::optional<ConfigNode> server_preset;
  if (server != nullptr) server_preset = load_preset(*server, "servers", base_dir, node->path());
  const ConfigNode* nic_name =
      nic != nullptr ? nic : (server_preset ? server_preset->find("nic") : nullptr);
  if (nic_name != nullptr) {
    const ConfigNode nic_preset = load_preset(*nic_name, "nics", base_dir, node->path());
    for (const ConfigNode::Entry& e : nic_preset.entries())
      merged.set(e.key, e.key_where, e.value);
  }
  if (server_preset) {
    for (const ConfigNode::Entry& e : server_preset->entries())
      merged.set(e.key, e.key_where, e.value);
  }
  for (const ConfigNode::Entry& e : node->entries())
    merged.set(e.key, e.key_where, e.value);
  ConfigNode out = topology;
  out.set("node", topology.key_where("node"), std::move(merged));
  return out;
}

std::unique_ptr<ScenarioRun> build(const ConfigNode& root, const std::string& file,
                                   const std::string& base_dir, const Overrides& o) {
  auto run = std::make_unique<ScenarioRun>();
  // The scenario as written, with its topology file read in and the calibrated parameters
  // applied: everything below reads this tree, so an override is checked like a written value.
  ConfigNode written = root;
  {
    const ParamReader r0(root, kScenarioTable);
    written.set("topology", root.key_where("topology"),
                resolve_topology(r0.node("topology"), base_dir));
    if (const ConfigNode* list = root.find("workloads"); list != nullptr) {
      written.set("workloads", root.key_where("workloads"),
                  expand_workload_includes(*list, base_dir));
    }
    if (r0.has("calibration")) {
      const ConfigNode& c = r0.node("calibration");
      std::vector<const ConfigNode*> files;
      if (c.is_sequence()) {
        for (const ConfigNode& item : c.items())
          files.push_back(&item);
      } else {
        files.push_back(&c);
      }
      for (const ConfigNode* f : files) {
        if (!f->is_scalar()) {
          throw InputError(f->where(), f->path(), "the name of a calibration file", f->describe());
        }
        std::filesystem::path p(f->value());
        if (p.is_relative()) p = std::filesystem::path(base_dir) / p;
        for (ParamOverride& po : read_calibration_file(p.string(), f))
          run->calibration.push_back(std::move(po));
      }
    }
    for (const ParamOverride& po : o.parameters)
      run->calibration.push_back(po);
    for (const ParamOverride& po : run->calibration) {
      // Calibration files are read before any override applies: naming one through an override
      // (--set, a study's axis, another calibration file) would change nothing.
      if (po.path == "calibration" || po.path.starts_with("calibration.") ||
          po.path.starts_with("calibration[")) {
        throw InputError(po.value.where(), po.path,
                         "a parameter path (calibration files are named by --calibration or "
                         "the scenario's own calibration key)",
                         "'" + po.path + "'");
      }
      written = apply_override(written, po);
      // An override may name another topology file (`--set topology=FILE`, a study's axis):
      // read in as the written one is, relative to the scenario, so that later overrides reach
      // into it.
      if (const ConfigNode* t = written.find("topology"); t != nullptr && t->is_scalar()) {
        written.set("topology", written.key_where("topology"), resolve_topology(*t, base_dir));
      }
    }
    // Presets after the overrides, so that an override may name another preset; keys written
    // (or overridden) in a section still win over its preset's.
    written.set("topology", written.key_where("topology"),
                apply_hardware_presets(*written.find("topology"), base_dir));
    if (r0.has("calibration")) {
      // The values are in the tree now; the effective scenario must not apply them again from
      // files that may not be there when it is re-run.
      ConfigNode without = ConfigNode::map(written.where(), written.path());
      for (const ConfigNode::Entry& e : written.entries()) {
        if (e.key != "calibration") without.set(e.key, e.key_where, e.value);
      }
      written = std::move(without);
    }
  }
  run->calibration_yaml = overrides_yaml(run->calibration);

  EffectiveConfig sink;
  const ParamReader r(written, kScenarioTable, &sink);
  run->file = file;
  run->name = r.has("name") ? r.string("name") : std::filesystem::path(file).stem().string();
  run->seed = o.seed.value_or(static_cast<uint64_t>(r.integer("seed")));
  run->fabric = topology::build_topology(r.node("topology"), &sink);

  routing::Routing routing = routing::make_routing(r, "routing", run->fabric, run->seed);
  run->router = std::move(routing.router);
  run->network = network::make_network(r, "network", run->fabric, {.threads = o.threads});

  engine::SimulationConfig sc;
  sc.seed = run->seed;
  sc.source_port = routing.source_port;
  run->sim = std::make_unique<engine::Simulation>(run->fabric, *run->router, *run->network, sc);
  if (r.has("events")) read_events(r, r.node("events"), *run->sim);

  const ParamReader nccl = r.section("nccl", collectives::nccl::nccl_table());
  run->nccl = collectives::nccl::read_nccl(nccl, collectives::nccl::NcclConfig{}, false);
  const std::span<const fabric::Server> servers = run->fabric.servers();
  const bool one_cpu =
      !servers.empty() && std::all_of(servers.begin(), servers.end(),
                                      [&](const auto& s) { return s.cpu == servers.front().cpu; });
  if (one_cpu && (!run->nccl.net_overhead || !run->nccl.buffsize)) {
    // NCCL's defaults that follow the host CPU (each communicator's, see OpRunner): where every
    // server has the same, the effective scenario records the values, which calibration starts
    // from.
    const fabric::CpuKind cpu = servers.front().cpu;
    std::vector<std::pair<std::string_view, std::string>> computed;
    if (!run->nccl.net_overhead) {
      computed.emplace_back(
          "NCCL_NET_OVERHEAD",
          fmt::format("{}us", collectives::nccl::default_net_overhead(cpu).in_us()));
    }
    if (!run->nccl.buffsize) {
      computed.emplace_back(
          "NCCL_BUFFSIZE",
          fmt::format(
              "{}MiB",
              collectives::nccl::default_buffsize(
                  cpu, collectives::nccl::for_gpus(run->nccl, servers.front().arch).tuning_tables)
                      .count() >>
                  20));
    }
    sink.record(nccl.effective(computed));
  }
  const Jobs jobs = read_jobs(r, run->fabric, run->seed);
  run->job_ranks = jobs.main;

  const ConfigNode empty = ConfigNode::sequence(written.where(), "workloads");
  const ConfigNode& list = o.skip_workloads || !r.has("workloads") ? empty : r.node("workloads");
  if (!o.skip_workloads && list.items().empty()) {
    r.fail("workloads", "at least one workload", r.has("workloads") ? "an empty list" : "none");
  }
  std::map<std::string, engine::WorkloadId> by_name;
  for (size_t i = 0; i < list.items().size(); ++i) {
    const ConfigNode& item = list.items()[i];
    if (!item.is_map()) {
      throw InputError(item.where(), item.path(), "a workload mapping with a 'type' key",
                       item.describe());
    }
    const ConfigNode* type = item.find("type");
    if (type == nullptr) {
      throw InputError(item.named_at(), config_path(item.path(), "type"),
                       fmt::format("the required key 'type' (a workload type: {})",
                                   engine::kWorkloadTypeParam.choices),
                       "the key is missing");
    }
    const WorkloadKind* kind = nullptr;
    for (const WorkloadKind& k : workload_kinds()) {
      if (type->is_scalar() && type->value() == k.type) kind = &k;
    }
    if (kind == nullptr) {
      std::string types;
      for (const WorkloadKind& k : workload_kinds()) {
        types += types.empty() ? "" : ", ";
        types += fmt::format("'{}'", k.type);
      }
      throw InputError(type->where(), type->path(), fmt::format("one of {}", types),
                       type->describe());
    }
    const ParamReader w(item, *kind->table, &sink);
    const std::string name =
        w.has("name") ? w.string("name") : default_workload_name(kind->type, i);
    if (by_name.count(name) != 0) {
      w.fail(w.has("name") ? "name" : "type", "a name not used by another workload",
             fmt::format("'{}' again", name));
    }
    std::vector<engine::WorkloadId> after;
    if (w.has("after")) {
      for (const ConfigNode& a : w.node("after").items()) {
        const auto it = a.is_scalar() ? by_name.find(a.value()) : by_name.end();
        if (it == by_name.end()) {
          throw InputError(a.where(), a.path(), "the name of a workload listed before this one",
                           a.describe());
        }
        after.push_back(it->second);
      }
    }
    const std::vector<fabric::NodeId>* job = &jobs.main;
    if (w.has("job")) {
      const auto it = jobs.named.find(w.string("job"));
      if (it == jobs.named.end()) {
        w.fail("job", "the name of a job of `jobs`",
               fmt::format("'{}', which is not one", w.string("job")));
      }
      job = &it->second;
    }
    // A job of every GPU in fabric order speaks of the fabric's ranks, as before jobs existed.
    const bool whole =
        std::equal(job->begin(), job->end(), run->fabric.gpus().begin(), run->fabric.gpus().end());
    const fabric::Ranks ranks(run->fabric, *job, !whole);
    // Relative paths in a workload resolve against the file that holds it (an included one).
    std::string dir = base_dir;
    if (item.where().known() && root.where().known() && *item.where().file != *root.where().file) {
      dir = std::filesystem::path(*item.where().file).parent_path().string();
    }
    engine::WorkloadInput in{w, run->fabric, ranks, run->seed, name, dir};
    by_name[name] = run->sim->add_workload(kind->make(in, *run), w.time("start"), std::move(after));
  }

  const ParamReader out = r.section("output", kOutputTable);
  // Read (and checked) whether or not this run writes flows.
  const auto max_flows = static_cast<size_t>(out.integer("max_flows"));
  run->max_flow_records = o.flow_records ? max_flows : 0;
  run->compression = out.integer_as<int>("compression");
  if (run->compression > 9)
    out.fail("compression", "a deflate level from 0 to 9", std::to_string(run->compression));
  run->recorder = std::make_unique<metrics::Recorder>(*run->sim, run->max_flow_records);
  run->sim->add_observer(run->recorder.get());
  run->network->add_observer(&run->recorder->congestion());
  if (run->network->reports_congestion()) run->recorder->congestion().expect_reports();

  ConfigNode effective = sink.assemble(written);
  if (o.seed) {
    effective.set("seed", SourceLocation{},
                  ConfigNode::scalar(std::to_string(run->seed), SourceLocation{}, "seed"));
  }
  run->effective_yaml = to_yaml(effective);
  return run;
}

}  // namespace

void ScenarioRun::run() {
  sim->run();
  recorder->finalize();
}

std::unique_ptr<ScenarioRun> load_scenario(const std::string& path, const Overrides& o) {
  const ConfigNode root = load_yaml_file(path, "");
  const std::string base = std::filesystem::path(path).parent_path().string();
  return build(root, path, base.empty() ? "." : base, o);
}

std::unique_ptr<ScenarioRun> load_scenario_text(const std::string& text, const std::string& name,
                                                const std::string& base_dir, const Overrides& o) {
  return build(load_yaml_text(text, name), name, base_dir, o);
}

fabric::Fabric load_topology(const std::string& path) {
  const ConfigNode root = load_yaml_file(path, "");
  if (!root.is_map()) {
    throw InputError(root.where(), "", "a scenario or topology mapping", root.describe());
  }
  const std::string base = std::filesystem::path(path).parent_path().string();
  const std::string dir = base.empty() ? "." : base;
  if (const ConfigNode* t = root.find("topology")) {
    return topology::build_topology(apply_hardware_presets(resolve_topology(*t, dir), dir));
  }
  return topology::build_topology(apply_hardware_presets(root, dir));
}

std::vector<const ParamTable*> all_tables() {
  std::vector<const ParamTable*> t{&kScenarioTable};
  for (const topology::TopologyBuilder& b : topology::topology_builders())
    t.push_back(b.table);
  for (const ParamTable* s : topology::clos_subtables())
    t.push_back(s);
  for (const ParamTable* s : topology::rail_subtables())
    t.push_back(s);
  t.push_back(&topology::server_table());
  for (const routing::RouterType& s : routing::routing_schemes()) {
    if (std::find(t.begin(), t.end(), s.table) == t.end()) t.push_back(s.table);
  }
  for (const ParamTable* s : routing::routing_subtables())
    t.push_back(s);
  for (const network::NetworkModelType& m : network::network_models())
    t.push_back(m.table);
  for (const ParamTable* s : network::fluid_subtables())
    t.push_back(s);
  t.push_back(&collectives::nccl::nccl_table());
  t.push_back(&job_table());
  t.push_back(&jobs_item_table());
  t.push_back(&event_table());
  for (const WorkloadKind& k : workload_kinds())
    t.push_back(k.table);
  t.push_back(&workload::kFlowTable);
  for (const ParamTable* s : training::training_subtables())
    t.push_back(s);
  t.push_back(&kOutputTable);
  t.push_back(&calibration_file_table());
  t.push_back(&study_table());
  return t;
}

std::string scenario_reference_markdown() {
  std::string out;
  for (const ParamTable* t : all_tables())
    out += table_markdown(*t) + "\n";
  return out;
}

}  // namespace rocesim::scenario
