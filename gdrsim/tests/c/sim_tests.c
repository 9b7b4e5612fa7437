/* Tests of the gdrdrv / CUDA emulator through raw open/ioctl/mmap, exactly as a driver
 * client sees them. Each case adapts to the GDRSIM_* settings it runs under (run.sh runs the
 * suite under several) and skips itself where it does not apply. */
#include "sim.h"

static const struct check_case cases[] = {
    {"version", t_version},
    {"dispatcher", t_dispatcher},
    {"pin_v2", t_pin_v2},
    {"pin_v1_tokens", t_pin_v1_tokens},
    {"rounding", t_rounding},
    {"mmap_rules", t_mmap_rules},
    {"req_mapping_type", t_req_mapping_type},
    {"info", t_info},
    {"free_while_mapped", t_free_while_mapped},
    {"invalidate_only_overlapping", t_invalidate_only_overlapping},
    {"unpin_while_mapped", t_unpin_while_mapped},
    {"fork_child", t_fork_child},
    {"scm_rights", t_scm_rights},
    {"close_semantics", t_close_semantics},
    {"get_attr", t_get_attr},
    {"threads", t_threads},
    {"fork_busy", t_fork_busy},
    {"old_versions", t_old_versions},
    {"fail_injection", t_fail_injection},
    {"fail_panic", t_fail_panic},
    {"fail_env", t_fail_env},
    {"device_node", t_device_node},
    {"counters", t_counters},
    {"cuda_basics", t_cuda_basics},
    {"fork_before_init", t_fork_before_init},
    {"pin_foreign_memory", t_pin_foreign_memory},
    {"vmm", t_vmm},
    {"vmm_pieces", t_vmm_pieces},
    {"pin_copy_out_fault", t_pin_copy_out_fault},
    {"dmabuf", t_dmabuf},
    {"passthrough", t_passthrough},
    {"stale_fd", t_stale_fd},
    {"node_stat", t_node_stat},
    {"node_stat_passthrough", t_node_stat_passthrough},
    {"node_open", t_node_open},
    {"hookable_entries", t_hookable_entries},
    {"ucx_driver_functions", t_ucx_driver_functions},
    {"pointer_attributes", t_pointer_attributes},
    {"chunk_pins", t_chunk_pins},
    {"syscall_mmap", t_syscall_mmap},
    {"proc_maps", t_proc_maps},
    {"vmm_export", t_vmm_export},
    {"vk_device", t_vk_device},
    {"vk_import", t_vk_import},
    {"vk_fail", t_vk_fail},
    {"vk_fork", t_vk_fork},
    {"vk_threads", t_vk_threads},
    {"vk_bar1", t_vk_bar1},
    {"vk_import_limit", t_vk_import_limit},
    {"vk_import_cost", t_vk_import_cost},
};

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    return check_run_cases("sim_tests", cases, sizeof(cases) / sizeof(cases[0]), argc, argv);
}
