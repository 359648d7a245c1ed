// The lavapipe bug behind ggml-rs patch 10 (docs/notes/vulkan.md),
// without ggml: a descriptor set binding that the pipeline does not use
// keeps a buffer that has been destroyed (valid Vulkan: such a binding may
// hold an invalid descriptor; the validation layers report nothing). Mesa
// 22.3's lavapipe binds every descriptor of the set at each dispatch and
// takes a reference on the destroyed buffer's freed pipe_resource: heap
// corruption ("corrupted double-linked list") within a few hundred rounds;
// valgrind shows the read after free of a 496-byte block freed in the
// driver's queue thread. Mesa 25.0 runs it clean.
//
//   run.sh [ROUNDS]   (builds into a temporary folder and runs it)
//   stale SHADER.spv [ROUNDS]
#include <vulkan/vulkan.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define CK(x) do { VkResult r_ = (x); if (r_) { fprintf(stderr, "%s: %d\n", #x, r_); exit(1); } } while (0)
static VkDevice dev; static VkPhysicalDevice pd;
static uint32_t memtype(uint32_t bits) {
  VkPhysicalDeviceMemoryProperties mp; vkGetPhysicalDeviceMemoryProperties(pd, &mp);
  for (uint32_t i = 0; i < mp.memoryTypeCount; i++)
    if ((bits & (1u << i)) && (mp.memoryTypes[i].propertyFlags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT)) return i;
  exit(2);
}
static void mkbuf(VkBuffer *b, VkDeviceMemory *m, VkDeviceSize size) {
  VkBufferCreateInfo bi = { VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, 0, 0, size, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, VK_SHARING_MODE_EXCLUSIVE };
  CK(vkCreateBuffer(dev, &bi, 0, b));
  VkMemoryRequirements r; vkGetBufferMemoryRequirements(dev, *b, &r);
  VkMemoryAllocateInfo ai = { VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, 0, r.size, memtype(r.memoryTypeBits) };
  CK(vkAllocateMemory(dev, &ai, 0, m)); CK(vkBindBufferMemory(dev, *b, *m, 0));
}
static void write(VkDescriptorSet set, uint32_t binding, VkBuffer b) {
  VkDescriptorBufferInfo info = { b, 0, VK_WHOLE_SIZE };
  VkWriteDescriptorSet w = { VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, 0, set, binding, 0, 1, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 0, &info, 0 };
  vkUpdateDescriptorSets(dev, 1, &w, 0, 0);
}
static uint32_t *read_spv(const char *path, size_t *len) {
  FILE *fp = fopen(path, "rb");
  if (!fp) { perror(path); exit(2); }
  fseek(fp, 0, SEEK_END); *len = (size_t)ftell(fp); fseek(fp, 0, SEEK_SET);
  uint32_t *code = malloc(*len);
  if (fread(code, 1, *len, fp) != *len) { perror(path); exit(2); }
  fclose(fp);
  return code;
}
int main(int argc, char **argv) {
  if (argc < 2) { fprintf(stderr, "usage: stale SHADER.spv [ROUNDS]\n"); return 2; }
  size_t spv_len; uint32_t *spv = read_spv(argv[1], &spv_len);
  int rounds = argc > 2 ? atoi(argv[2]) : 200;
  VkApplicationInfo app = { VK_STRUCTURE_TYPE_APPLICATION_INFO, 0, "stale", 0, 0, 0, VK_API_VERSION_1_2 };
  VkInstanceCreateInfo ici = { VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, 0, 0, &app };
  VkInstance inst; CK(vkCreateInstance(&ici, 0, &inst));
  uint32_t n = 1; vkEnumeratePhysicalDevices(inst, &n, &pd);
  VkPhysicalDeviceProperties props; vkGetPhysicalDeviceProperties(pd, &props);
  printf("device: %s (driver %u.%u.%u)\n", props.deviceName, VK_VERSION_MAJOR(props.driverVersion), VK_VERSION_MINOR(props.driverVersion), VK_VERSION_PATCH(props.driverVersion));
  float prio = 1; VkDeviceQueueCreateInfo qi = { VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, 0, 0, 0, 1, &prio };
  VkDeviceCreateInfo dci = { VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, 0, 0, 1, &qi };
  CK(vkCreateDevice(pd, &dci, 0, &dev));
  VkQueue q; vkGetDeviceQueue(dev, 0, 0, &q);
  VkDescriptorSetLayoutBinding lb[2] = { { 0, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT }, { 1, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT } };
  VkDescriptorSetLayoutCreateInfo lci = { VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO, 0, 0, 2, lb };
  VkDescriptorSetLayout dsl; CK(vkCreateDescriptorSetLayout(dev, &lci, 0, &dsl));
  VkPipelineLayoutCreateInfo plci = { VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO, 0, 0, 1, &dsl };
  VkPipelineLayout pl; CK(vkCreatePipelineLayout(dev, &plci, 0, &pl));
  VkShaderModuleCreateInfo smci = { VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, 0, 0, spv_len, spv };
  VkShaderModule sm; CK(vkCreateShaderModule(dev, &smci, 0, &sm));
  VkComputePipelineCreateInfo cpci = { VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO, 0, 0, { VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, 0, 0, VK_SHADER_STAGE_COMPUTE_BIT, sm, "main" }, pl };
  VkPipeline pipe; CK(vkCreateComputePipelines(dev, 0, 1, &cpci, 0, &pipe));
  VkDescriptorPoolSize ps = { VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 4 };
  VkDescriptorPoolCreateInfo dpci = { VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO, 0, 0, 1, 1, &ps };
  VkDescriptorPool dp; CK(vkCreateDescriptorPool(dev, &dpci, 0, &dp));
  VkDescriptorSetLayout dsls[2] = { dsl, dsl };
  VkDescriptorSetAllocateInfo dsai = { VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO, 0, dp, 2, dsls };
  VkDescriptorSet sets[2]; CK(vkAllocateDescriptorSets(dev, &dsai, sets));
  VkCommandPoolCreateInfo cpi = { VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO, 0, 0, 0 };
  VkCommandPool cp; CK(vkCreateCommandPool(dev, &cpi, 0, &cp));
  VkFenceCreateInfo fci = { VK_STRUCTURE_TYPE_FENCE_CREATE_INFO };
  VkFence f; CK(vkCreateFence(dev, &fci, 0, &f));
  VkBuffer a; VkDeviceMemory am; mkbuf(&a, &am, 4096);
  for (int i = 0; i < rounds; i++) {
    // S0 = {a, b}, S1 = {a, c}; binding 1 is not used by the shader.
    VkBuffer b, c; VkDeviceMemory bm, cm;
    mkbuf(&b, &bm, 4096 + 64 * (i % 7)); mkbuf(&c, &cm, 4096);
    write(sets[0], 0, a); write(sets[0], 1, b); write(sets[1], 0, a); write(sets[1], 1, c);
    // dispatch S0; destroy b (S0's binding 1 is now stale, which Vulkan
    // allows for a binding the pipeline does not use); dispatch S1 (the
    // driver drops its last hold of b); dispatch S0 again.
    int order[3] = { 0, 1, 0 };
    for (int k = 0; k < 3; k++) {
      if (k == 1) { vkDestroyBuffer(dev, b, 0); vkFreeMemory(dev, bm, 0); }
      VkCommandBufferAllocateInfo cbai = { VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, 0, cp, VK_COMMAND_BUFFER_LEVEL_PRIMARY, 1 };
      VkCommandBuffer cb; CK(vkAllocateCommandBuffers(dev, &cbai, &cb));
      VkCommandBufferBeginInfo cbbi = { VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO, 0, VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT };
      CK(vkBeginCommandBuffer(cb, &cbbi));
      vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pipe);
      vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pl, 0, 1, &sets[order[k]], 0, 0);
      vkCmdDispatch(cb, 1, 1, 1);
      CK(vkEndCommandBuffer(cb));
      VkSubmitInfo si = { VK_STRUCTURE_TYPE_SUBMIT_INFO, 0, 0, 0, 0, 1, &cb };
      CK(vkQueueSubmit(q, 1, &si, f));
      CK(vkWaitForFences(dev, 1, &f, VK_TRUE, UINT64_MAX)); CK(vkResetFences(dev, 1, &f));
      vkFreeCommandBuffers(dev, cp, 1, &cb);
    }
    vkDestroyBuffer(dev, c, 0); vkFreeMemory(dev, cm, 0);
  }
  uint32_t *p; CK(vkMapMemory(dev, am, 0, 4, 0, (void **)&p));
  printf("a[0] = %u after %d rounds (want %d)\n", *p, rounds, 3 * rounds);
  return 0;
}
