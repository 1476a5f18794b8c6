//! What the Vulkan driver made of Volta's kernels: registers, shared memory, spills.
//!
//! A kernel's speed on a GPU often turns on numbers WGSL cannot show: how many
//! registers the driver's compiler gave each thread (which decides how many
//! workgroups share a core) and whether it spilled any. Vulkan drivers report them
//! through `VK_KHR_pipeline_executable_properties`; this tool compiles WGSL files the
//! way wgpu compiles Volta's kernels (naga to SPIR-V, no bounds checks, no loop
//! bounding, no zeroed shared memory) on a device that has that extension enabled,
//! and prints every statistic the driver gives for each pipeline: one per compute
//! entry point, named `file:entry` where a module has several (the attention
//! kernels' forward and backward share one).
//!
//! ```text
//! VOLTA_DUMP_WGSL=/tmp/k cargo run --release --example bench_gpu -- --defaults
//! cargo run --release --example shader_stats -- /tmp/k            # every .wgsl in it
//! cargo run --release --example shader_stats -- /tmp/k --ir out/  # also the driver's IR
//! ```
//!
//! `VOLTA_DUMP_WGSL=DIR` makes any Volta program write each kernel's source to `DIR`
//! as it is compiled. The adapter is the first Vulkan one (`WGPU_ADAPTER_NAME` picks
//! another).
use clap::Parser;
use std::ffi::CStr;
use std::path::PathBuf;

use ash::vk;
use wgpu::hal;
use wgpu::naga;

/// Compiles WGSL files as wgpu compiles Volta's kernels, on the first Vulkan adapter
/// (`WGPU_ADAPTER_NAME` picks another) with `VK_KHR_pipeline_executable_properties`,
/// and prints every statistic the driver gives for each pipeline: registers, shared
/// memory, spills. `VOLTA_DUMP_WGSL=DIR` makes any Volta program write its kernels.
#[derive(Debug, Parser)]
#[command(name = "shader_stats", args_override_self = true)]
struct Args {
    /// WGSL files, or folders whose `.wgsl` files are all read (in name order).
    #[arg(value_name = "DIR_OR_WGSL", required = true)]
    inputs: Vec<PathBuf>,
    /// Also write the driver's internal representations of each pipeline to this
    /// folder.
    #[arg(long, value_name = "OUT_DIR")]
    ir: Option<PathBuf>,
}

/// The WGSL files `inputs` name: files as given, folders' `.wgsl` files sorted.
fn wgsl_files(inputs: &[PathBuf]) -> std::io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for p in inputs {
        if p.is_dir() {
            let mut in_dir: Vec<_> = std::fs::read_dir(p)?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "wgsl"))
                .collect();
            in_dir.sort();
            files.extend(in_dir);
        } else {
            files.push(p.clone());
        }
    }
    Ok(files)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let ir_dir = args.ir;
    let files = wgsl_files(&args.inputs)?;
    if files.is_empty() {
        return Err("no WGSL files in the folders given".into());
    }
    let probe = Probe::open()?;
    println!("adapter: {}", probe.adapter_name);
    for file in &files {
        let stem = file.file_stem().unwrap_or_default().to_string_lossy();
        let kernels = match std::fs::read_to_string(file)
            .map_err(|e| e.to_string())
            .and_then(|src| Compiled::all(&src, probe.api_version).map_err(|e| e.to_string()))
        {
            Ok(kernels) => kernels,
            Err(e) => {
                println!("{stem}: error: {e}");
                continue;
            }
        };
        // A module with several entry points (the attention kernels' forward and
        // backward) is one pipeline per entry: each is named after its entry.
        let several = kernels.len() > 1;
        for k in &kernels {
            let name = if several {
                format!("{stem}:{}", k.entry)
            } else {
                stem.to_string()
            };
            match probe.stats(k) {
                Ok(executables) => {
                    for exe in executables {
                        let line: Vec<String> =
                            exe.stats.iter().map(|(k, v)| format!("{k}={v}")).collect();
                        println!("{name}: {}", line.join(" "));
                        if let Some(dir) = &ir_dir {
                            std::fs::create_dir_all(dir)?;
                            for (i, (ir_name, text)) in exe.ir.iter().enumerate() {
                                let safe: String = ir_name
                                    .chars()
                                    .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                                    .collect();
                                let file = format!("{name}.{i}.{safe}.txt").replace(':', "-");
                                std::fs::write(dir.join(file), text)?;
                            }
                        }
                    }
                }
                Err(e) => println!("{name}: error: {e}"),
            }
        }
    }
    Ok(())
}

/// One compiled executable's statistics (name, value) and internal representations.
struct Executable {
    stats: Vec<(String, String)>,
    ir: Vec<(String, String)>,
}

/// A Vulkan device opened through wgpu-hal with pipeline statistics enabled.
struct Probe {
    adapter_name: String,
    api_version: u32,
    device: ash::Device,
    exec: ash::khr::pipeline_executable_properties::Device,
    /// Keeps the device (and through it the instance) alive.
    _open: hal::OpenDevice<hal::api::Vulkan>,
    _instance: wgpu::Instance,
}

impl Probe {
    fn open() -> Result<Probe, Box<dyn std::error::Error>> {
        let mut desc = wgpu::InstanceDescriptor::new_without_display_handle_from_env();
        desc.backends = wgpu::Backends::VULKAN;
        let instance = wgpu::Instance::new(desc);
        let adapter = pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions {
            power_preference: wgpu::PowerPreference::HighPerformance,
            ..Default::default()
        }))
        .map_err(|e| format!("no Vulkan adapter: {e}"))?;
        let adapter_name = adapter.get_info().name;
        // The features Volta asks for, so that the same SPIR-V is accepted.
        let wanted = wgpu::Features::SUBGROUP
            | wgpu::Features::SHADER_F16
            | wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX;
        let features = adapter.features() & wanted;
        let limits = adapter.limits();
        // SAFETY: the hal adapter is used only while `adapter` lives, on this thread.
        let hal_adapter = unsafe { adapter.as_hal::<hal::api::Vulkan>() }
            .ok_or("the adapter is not a Vulkan one")?;
        let raw_instance = hal_adapter.shared_instance().raw_instance().clone();
        let physical = hal_adapter.raw_physical_device();
        let ext = ash::khr::pipeline_executable_properties::NAME;
        // SAFETY: a query of the physical device the hal adapter wraps.
        let supported = unsafe { raw_instance.enumerate_device_extension_properties(physical) }?
            .iter()
            .any(|p| p.extension_name_as_c_str() == Ok(ext));
        if !supported {
            return Err(
                format!("{adapter_name}: the driver lacks {}", ext.to_string_lossy()).into(),
            );
        }
        // SAFETY: as above.
        let api_version =
            unsafe { raw_instance.get_physical_device_properties(physical) }.api_version;
        let mut exec_features =
            vk::PhysicalDevicePipelineExecutablePropertiesFeaturesKHR::default()
                .pipeline_executable_info(true);
        let feats: &mut vk::PhysicalDevicePipelineExecutablePropertiesFeaturesKHR =
            &mut exec_features;
        let callback: Box<hal::vulkan::CreateDeviceCallback> = Box::new(move |args| {
            args.extensions.push(ext);
            *args.create_info = std::mem::take(args.create_info).push_next(feats);
        });
        // SAFETY: the callback only adds an extension the device lists and its feature.
        let open = unsafe {
            hal_adapter.open_with_callback(
                features,
                &limits,
                &wgpu::MemoryHints::Performance,
                Some(callback),
            )
        }
        .map_err(|e| format!("opening the device: {e}"))?;
        let device = open.device.raw_device().clone();
        let exec = ash::khr::pipeline_executable_properties::Device::new(&raw_instance, &device);
        drop(hal_adapter);
        Ok(Probe {
            adapter_name,
            api_version,
            device,
            exec,
            _open: open,
            _instance: instance,
        })
    }

    /// Compiles one compute entry point and reads its statistics.
    fn stats(&self, k: &Compiled) -> Result<Vec<Executable>, Box<dyn std::error::Error>> {
        let bindings: Vec<vk::DescriptorSetLayoutBinding> = k
            .bindings
            .iter()
            .map(|&b| {
                vk::DescriptorSetLayoutBinding::default()
                    .binding(b)
                    .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                    .descriptor_count(1)
                    .stage_flags(vk::ShaderStageFlags::COMPUTE)
            })
            .collect();
        let (spv, threads) = (&k.spv, k.threads);
        let d = &self.device;
        // SAFETY: plain object creation on a live device; every object is destroyed
        // below, after the pipeline that uses it.
        unsafe {
            let shader =
                d.create_shader_module(&vk::ShaderModuleCreateInfo::default().code(spv), None)?;
            let set_layout = d.create_descriptor_set_layout(
                &vk::DescriptorSetLayoutCreateInfo::default().bindings(&bindings),
                None,
            )?;
            let layouts = [set_layout];
            let layout = d.create_pipeline_layout(
                &vk::PipelineLayoutCreateInfo::default().set_layouts(&layouts),
                None,
            )?;
            let entry_name = std::ffi::CString::new(k.entry.clone())?;
            let stage = vk::PipelineShaderStageCreateInfo::default()
                .flags(vk::PipelineShaderStageCreateFlags::ALLOW_VARYING_SUBGROUP_SIZE)
                .stage(vk::ShaderStageFlags::COMPUTE)
                .module(shader)
                .name(&entry_name);
            let create = vk::ComputePipelineCreateInfo::default()
                .flags(
                    vk::PipelineCreateFlags::CAPTURE_STATISTICS_KHR
                        | vk::PipelineCreateFlags::CAPTURE_INTERNAL_REPRESENTATIONS_KHR,
                )
                .stage(stage)
                .layout(layout);
            let pipeline = d
                .create_compute_pipelines(vk::PipelineCache::null(), &[create], None)
                .map_err(|(_, e)| e)?[0];
            // The workgroup's size beside the driver's figures: registers × threads
            // per workgroup against the core's register file gives the occupancy.
            let result = self.read(pipeline).map(|mut exes| {
                for e in &mut exes {
                    e.stats.insert(0, ("threads".into(), threads.to_string()));
                }
                exes
            });
            d.destroy_pipeline(pipeline, None);
            d.destroy_pipeline_layout(layout, None);
            d.destroy_descriptor_set_layout(set_layout, None);
            d.destroy_shader_module(shader, None);
            result
        }
    }

    /// Every executable of `pipeline`: its statistics and internal representations.
    unsafe fn read(
        &self,
        pipeline: vk::Pipeline,
    ) -> Result<Vec<Executable>, Box<dyn std::error::Error>> {
        // SAFETY (whole body): queries on a pipeline created with the capture flags.
        let props = unsafe {
            self.exec.get_pipeline_executable_properties(
                &vk::PipelineInfoKHR::default().pipeline(pipeline),
            )
        }?;
        let mut out = Vec::new();
        for i in 0..props.len() as u32 {
            let at = vk::PipelineExecutableInfoKHR::default()
                .pipeline(pipeline)
                .executable_index(i);
            let stats = unsafe { self.exec.get_pipeline_executable_statistics(&at) }?
                .iter()
                .map(|s| {
                    let name = text(&s.name).replace(' ', "_");
                    // SAFETY: the union member `format` names.
                    let value = unsafe {
                        match s.format {
                            vk::PipelineExecutableStatisticFormatKHR::BOOL32 => {
                                s.value.b32.to_string()
                            }
                            vk::PipelineExecutableStatisticFormatKHR::INT64 => {
                                s.value.i64.to_string()
                            }
                            vk::PipelineExecutableStatisticFormatKHR::UINT64 => {
                                s.value.u64.to_string()
                            }
                            _ => s.value.f64.to_string(),
                        }
                    };
                    (name, value)
                })
                .collect();
            out.push(Executable {
                stats,
                ir: unsafe { self.representations(&at) }.unwrap_or_default(),
            });
        }
        Ok(out)
    }

    /// The driver's text representations of one executable (may be none).
    unsafe fn representations(
        &self,
        at: &vk::PipelineExecutableInfoKHR,
    ) -> Result<Vec<(String, String)>, vk::Result> {
        let f = self
            .exec
            .fp()
            .get_pipeline_executable_internal_representations_khr;
        let handle = self.device.handle();
        let mut count = 0u32;
        // SAFETY: the two-call idiom; the second call fills buffers it was told the size of.
        unsafe {
            f(handle, at, &mut count, std::ptr::null_mut()).result()?;
            let mut reps =
                vec![vk::PipelineExecutableInternalRepresentationKHR::default(); count as usize];
            f(handle, at, &mut count, reps.as_mut_ptr()).result()?;
            let mut buffers: Vec<Vec<u8>> = reps.iter().map(|r| vec![0u8; r.data_size]).collect();
            for (r, b) in reps.iter_mut().zip(&mut buffers) {
                r.p_data = b.as_mut_ptr().cast();
            }
            f(handle, at, &mut count, reps.as_mut_ptr()).result()?;
            Ok(reps
                .iter()
                .zip(buffers)
                .filter(|(r, _)| r.is_text == vk::TRUE)
                .map(|(r, b)| {
                    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
                    (
                        text(&r.name),
                        String::from_utf8_lossy(&b[..end]).into_owned(),
                    )
                })
                .collect())
        }
    }
}

/// A WGSL kernel translated as wgpu translates Volta's kernels.
struct Compiled {
    spv: Vec<u32>,
    /// The compute entry point's name and its workgroup's size in threads.
    entry: String,
    threads: u32,
    /// Binding numbers of group 0 (Volta binds only storage buffers there).
    bindings: Vec<u32>,
}

impl Compiled {
    /// Every compute entry point of a module: parses, validates and writes SPIR-V
    /// for each, for a Vulkan of `api_version`, with the
    /// options wgpu-hal uses for a module created with
    /// `ShaderRuntimeChecks::unchecked()` and without zeroed workgroup memory (see
    /// `backend/gpu/runtime/pipelines.rs`): no bounds checks, no loop bounding, no checks on
    /// integer division.
    fn all(src: &str, api_version: u32) -> Result<Vec<Compiled>, Box<dyn std::error::Error>> {
        let module = naga::front::wgsl::parse_str(src).map_err(|e| e.emit_to_string(src))?;
        let info = naga::valid::Validator::new(
            naga::valid::ValidationFlags::all(),
            naga::valid::Capabilities::all(),
        )
        .validate(&module)
        .map_err(|e| e.emit_to_string(src))?;
        let unchecked = naga::proc::BoundsCheckPolicy::Unchecked;
        let options = naga::back::spv::Options {
            lang_version: if api_version >= vk::API_VERSION_1_3 {
                (1, 6)
            } else {
                (1, 5)
            },
            flags: naga::back::spv::WriterFlags::empty(),
            // Group and binding numbers go into the SPIR-V as they are.
            fake_missing_bindings: true,
            bounds_check_policies: naga::proc::BoundsCheckPolicies {
                index: unchecked,
                buffer: unchecked,
                image_load: unchecked,
                binding_array: unchecked,
            },
            zero_initialize_workgroup_memory:
                naga::back::spv::ZeroInitializeWorkgroupMemoryMode::None,
            force_loop_bounding: false,
            emit_int_div_checks: false,
            ..Default::default()
        };
        let bindings: Vec<u32> = module
            .global_variables
            .iter()
            .filter_map(|(_, g)| g.binding.as_ref())
            .filter(|b| b.group == 0)
            .map(|b| b.binding)
            .collect();
        let kernels: Vec<Compiled> = module
            .entry_points
            .iter()
            .filter(|e| e.stage == naga::ShaderStage::Compute)
            .map(|entry| {
                let pipeline_options = naga::back::spv::PipelineOptions {
                    shader_stage: naga::ShaderStage::Compute,
                    entry_point: entry.name.clone(),
                };
                let spv =
                    naga::back::spv::write_vec(&module, &info, &options, Some(&pipeline_options))?;
                Ok(Compiled {
                    spv,
                    entry: entry.name.clone(),
                    threads: entry.workgroup_size.iter().product(),
                    bindings: bindings.clone(),
                })
            })
            .collect::<Result<_, Box<dyn std::error::Error>>>()?;
        if kernels.is_empty() {
            return Err("no compute entry point".into());
        }
        Ok(kernels)
    }
}

fn text(chars: &[std::ffi::c_char]) -> String {
    // SAFETY: Vulkan's fixed-size name fields are NUL-terminated.
    unsafe { CStr::from_ptr(chars.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use volta::prelude::*;

    /// `VOLTA_DUMP_WGSL` writes each kernel a program compiles, and every one of
    /// them translates to SPIR-V here as wgpu translates it (the Vulkan part needs
    /// a driver with pipeline statistics, which lavapipe lacks).
    /// The command line of the docs and `scripts/device/shader-stats.sh`. (Called
    /// from the one test below: that test sets an environment variable.)
    fn command_line_parses_and_documents_every_option() {
        volta_examples::cli::assert_documented::<Args>();
        let parse = |argv: &str| Args::try_parse_from(argv.split_whitespace());
        let a = parse("shader_stats /tmp/k").unwrap();
        assert_eq!((a.inputs, a.ir), (vec![PathBuf::from("/tmp/k")], None));
        let a = parse("shader_stats /tmp/k --ir out/").unwrap();
        assert_eq!(a.ir, Some(PathBuf::from("out/")));
        let a = parse("shader_stats --ir out a.wgsl b.wgsl").unwrap();
        assert_eq!(a.inputs, [PathBuf::from("a.wgsl"), PathBuf::from("b.wgsl")]);
        assert!(parse("shader_stats").is_err());
        assert!(parse("shader_stats /tmp/k --ir").is_err());
        assert!(parse("shader_stats /tmp/k --irs out").is_err());

        let dir = std::env::temp_dir().join(format!("volta-wgsl-list-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for f in ["b.wgsl", "a.wgsl", "notes.txt"] {
            std::fs::write(dir.join(f), "").unwrap();
        }
        let files = wgsl_files(&[dir.clone(), PathBuf::from("x.wgsl")]).unwrap();
        assert_eq!(
            files,
            [
                dir.join("a.wgsl"),
                dir.join("b.wgsl"),
                PathBuf::from("x.wgsl")
            ]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn dumped_kernels_translate_to_spirv() {
        command_line_parses_and_documents_every_option();
        let dir = std::env::temp_dir().join(format!("volta-dump-{}", std::process::id()));
        // SAFETY: set before the GPU context exists, in this binary's only test.
        unsafe { std::env::set_var("VOLTA_DUMP_WGSL", &dir) };
        if Gpu::init().is_err() {
            panic!("no GPU adapter (install Mesa's lavapipe)");
        }
        let x = Tensor::<Rank2<8, 8>, Gpu>::ones();
        let total = x.matmul(&x).relu().softmax::<Axis<1>>().sum_all().item();
        assert!((total - 8.0).abs() < 1e-4);
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        let names: Vec<String> = files
            .iter()
            .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().any(|n| n.contains("-matmul-")), "{names:?}");
        assert!(names.iter().any(|n| n.contains("softmax")), "{names:?}");
        for (i, f) in files.iter().enumerate() {
            assert!(names[i].starts_with(&format!("{i:03}-")), "{names:?}");
            let kernels = Compiled::all(&std::fs::read_to_string(f).unwrap(), vk::API_VERSION_1_3)
                .unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            for k in kernels {
                assert_eq!(k.spv[0], 0x0723_0203, "SPIR-V magic");
                assert!(k.threads > 0 && k.bindings.contains(&0), "{}", f.display());
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A module with two compute entry points gives two pipelines, each with its
    /// own entry and workgroup size (the attention kernels' modules hold three).
    #[test]
    fn every_entry_point_is_compiled() {
        let src = "@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@compute @workgroup_size(64) fn first(@builtin(global_invocation_id) i: vec3<u32>) { x[i.x] = 1.0; }
@compute @workgroup_size(128) fn second(@builtin(global_invocation_id) i: vec3<u32>) { x[i.x] = 2.0; }
";
        let kernels = Compiled::all(src, vk::API_VERSION_1_3).unwrap();
        let entries: Vec<(&str, u32)> = kernels
            .iter()
            .map(|k| (k.entry.as_str(), k.threads))
            .collect();
        assert_eq!(entries, [("first", 64), ("second", 128)]);
        assert_ne!(kernels[0].spv, kernels[1].spv);
    }
}
