//===--- runtime/pjrt/abi.h - our declarations of the PJRT C ABI ----------===//
//
// The subset of the PJRT C API (major version 0) that the runtime calls,
// declared by us from the API's public documentation: struct layouts,
// the order of the PJRT_Api function table, and enum values. Only what we
// use is spelled out; function-table slots we never call are `void*`.
//
// Rules of the ABI that this file relies on:
//  * Every args struct begins {size_t struct_size; PJRT_Extension_Base*
//    extension_start;}. The caller zeroes the struct and sets struct_size to
//    the size it knows; a plugin accepts a caller struct that is larger than
//    its own (it ignores the tail) and rejects a smaller one. So the structs
//    here are declared at the NEWEST layout we know (API 0.114), which older
//    plugins accept as well. Bump them deliberately.
//  * New function pointers are only appended to PJRT_Api. Before calling a
//    pointer, check that the plugin's api->struct_size covers it
//    (TPR_PJRT_HAS, below).
//  * A NULL PJRT_Error* is success; any other error is owned by the caller.
//
// Nothing in this file may be included outside runtime/pjrt/.
//
//===----------------------------------------------------------------------===//
#ifndef TPR_RUNTIME_PJRT_ABI_H_
#define TPR_RUNTIME_PJRT_ABI_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// The API version our struct layouts correspond to.
#define TPR_PJRT_ABI_MINOR 114
// The oldest plugin we accept (0.60 has everything in the core set below,
// non_donatable_input_indices (0.39), Executable_OutputElementTypes /
// OutputDimensions (0.29) and the modern extension_start field (0.42)).
#define TPR_PJRT_MIN_MINOR 60

typedef struct PJRT_Extension_Base {
  size_t struct_size;
  int type;  // PJRT_Extension_Type
  struct PJRT_Extension_Base* next;
} PJRT_Extension_Base;

// Opaque plugin objects.
typedef struct PJRT_Error PJRT_Error;
typedef struct PJRT_Event PJRT_Event;
typedef struct PJRT_Client PJRT_Client;
typedef struct PJRT_Device PJRT_Device;
typedef struct PJRT_DeviceDescription PJRT_DeviceDescription;
typedef struct PJRT_Memory PJRT_Memory;
typedef struct PJRT_Buffer PJRT_Buffer;
typedef struct PJRT_Executable PJRT_Executable;
typedef struct PJRT_LoadedExecutable PJRT_LoadedExecutable;
typedef struct PJRT_SerializedExecutable PJRT_SerializedExecutable;

// The absl status codes 0..16; identical to tpr_status_code_t.
typedef enum { PJRT_Error_Code_OK = 0 } PJRT_Error_Code;

// Element types: numbered exactly as tpr_dtype_t (base.h), which is why
// dtypes are passed through as plain ints.
typedef int PJRT_Buffer_Type;

typedef enum {
  PJRT_HostBufferSemantics_kImmutableOnlyDuringCall = 0,
  PJRT_HostBufferSemantics_kImmutableUntilTransferCompletes = 1,
  PJRT_HostBufferSemantics_kImmutableZeroCopy = 2,
  PJRT_HostBufferSemantics_kMutableZeroCopy = 3,
} PJRT_HostBufferSemantics;

typedef enum {
  PJRT_NamedValue_kString = 0,
  PJRT_NamedValue_kInt64 = 1,
  PJRT_NamedValue_kInt64List = 2,
  PJRT_NamedValue_kFloat = 3,
  PJRT_NamedValue_kBool = 4,
} PJRT_NamedValue_Type;

typedef struct PJRT_NamedValue {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  const char* name;
  size_t name_size;
  PJRT_NamedValue_Type type;
  union {
    const char* string_value;
    int64_t int64_value;
    const int64_t* int64_array_value;
    float float_value;
    bool bool_value;
  };
  size_t value_size;  // 1 for scalars, element count for strings and lists
} PJRT_NamedValue;

//===--- args structs, in PJRT_Api order ----------------------------------===//

#define TPR_PJRT_ARGS_HEAD      \
  size_t struct_size;           \
  PJRT_Extension_Base* extension_start

typedef struct { TPR_PJRT_ARGS_HEAD; int major_version, minor_version; }
    PJRT_Api_Version;

typedef struct { TPR_PJRT_ARGS_HEAD; PJRT_Error* error; }
    PJRT_Error_Destroy_Args;
typedef struct {
  TPR_PJRT_ARGS_HEAD;
  const PJRT_Error* error;
  const char* message;  // out; lives as long as |error|
  size_t message_size;  // out
} PJRT_Error_Message_Args;
typedef struct {
  TPR_PJRT_ARGS_HEAD;
  const PJRT_Error* error;
  PJRT_Error_Code code;  // out
} PJRT_Error_GetCode_Args;

typedef struct { TPR_PJRT_ARGS_HEAD; } PJRT_Plugin_Initialize_Args;
typedef struct {
  TPR_PJRT_ARGS_HEAD;
  const PJRT_NamedValue* attributes;  // out; process lifetime
  size_t num_attributes;              // out
} PJRT_Plugin_Attributes_Args;

typedef struct { TPR_PJRT_ARGS_HEAD; PJRT_Event* event; }
    PJRT_Event_Destroy_Args;
typedef struct { TPR_PJRT_ARGS_HEAD; PJRT_Event* event; } PJRT_Event_Await_Args;
typedef struct {
  TPR_PJRT_ARGS_HEAD;
  PJRT_Event* event;
  bool is_ready;  // out
} PJRT_Event_IsReady_Args;
// The callback owns |error| (NULL on success) and must destroy it.
typedef void (*PJRT_Event_OnReadyCallback)(PJRT_Error* error, void* user_arg);
typedef struct {
  TPR_PJRT_ARGS_HEAD;
  PJRT_Event* event;
  PJRT_Event_OnReadyCallback callback;
  void* user_arg;
} PJRT_Event_OnReady_Args;

typedef struct {
  TPR_PJRT_ARGS_HEAD;
  const PJRT_NamedValue* create_options;
  size_t num_options;
  void* kv_get_callback;  // multi-process only; NULL
  void* kv_get_user_arg;
  void* kv_put_callback;
  void* kv_put_user_arg;
  PJRT_Client* client;  // out
  void* kv_try_get_callback;
  void* kv_try_get_user_arg;
} PJRT_Client_Create_Args;
typedef struct { TPR_PJRT_ARGS_HEAD; PJRT_Client* client; }
    PJRT_Client_Destroy_Args;
typedef struct {
  TPR_PJRT_ARGS_HEAD;
  PJRT_Client* client;
  const char* value;  // out: platform_name / platform_version
  size_t value_size;  // out
} PJRT_Client_String_Args;  // PlatformName and PlatformVersion share a layout
typedef struct {
  TPR_PJRT_ARGS_HEAD;
  PJRT_Client* client;
  PJRT_Device* const* addressable_devices;  // out; owned by the client
  size_t num_addressable_devices;           // out
} PJRT_Client_AddressableDevices_Args;

typedef struct {
  TPR_PJRT_ARGS_HEAD;
  char* code;
  size_t code_size;
  const char* format;  // "mlir"
  size_t format_size;
} PJRT_Program;
typedef struct {
  TPR_PJRT_ARGS_HEAD;
  PJRT_Client* client;
  const PJRT_Program* program;
  const char* compile_options;  // serialized xla.CompileOptionsProto
  size_t compile_options_size;
  PJRT_LoadedExecutable* executable;  // out
} PJRT_Client_Compile_Args;

typedef struct PJRT_Buffer_MemoryLayout PJRT_Buffer_MemoryLayout;
typedef struct {
  TPR_PJRT_ARGS_HEAD;
  PJRT_Client* client;
  const void* data;
  PJRT_Buffer_Type type;
  const int64_t* dims;
  size_t num_dims;
  const int64_t* byte_strides;  // NULL: dense row-major
  size_t num_byte_strides;
  PJRT_HostBufferSemantics host_buffer_semantics;
  PJRT_Device* device;
  PJRT_Memory* memory;                      // wins over |device| if set
  PJRT_Buffer_MemoryLayout* device_layout;  // NULL: default
  PJRT_Event* done_with_host_buffer;        // out; caller destroys
  PJRT_Buffer* buffer;                      // out
} PJRT_Client_BufferFromHostBuffer_Args;

typedef struct {
  TPR_PJRT_ARGS_HEAD;
  PJRT_DeviceDescription* device_description;
  int id;  // out
} PJRT_DeviceDescription_Id_Args;
typedef struct {
  TPR_PJRT_ARGS_HEAD;
  PJRT_DeviceDescription* device_description;
  const char* device_kind;  // out
  size_t device_kind_size;  // out
} PJRT_DeviceDescription_Kind_Args;
typedef struct {
  TPR_PJRT_ARGS_HEAD;
  PJRT_Device* device;
  PJRT_DeviceDescription* device_description;  // out
} PJRT_Device_GetDescription_Args;

typedef struct {
  TPR_PJRT_ARGS_HEAD;
  PJRT_Device* device;
  int64_t bytes_in_use;  // out; always set
  int64_t peak_bytes_in_use;
  bool peak_bytes_in_use_is_set;
  int64_t num_allocs;
  bool num_allocs_is_set;
  int64_t largest_alloc_size;
  bool largest_alloc_size_is_set;
  int64_t bytes_limit;
  bool bytes_limit_is_set;
  int64_t bytes_reserved;
  bool bytes_reserved_is_set;
  int64_t peak_bytes_reserved;
  bool peak_bytes_reserved_is_set;
  int64_t bytes_reservable_limit;
  bool bytes_reservable_limit_is_set;
  int64_t largest_free_block_bytes;
  bool largest_free_block_bytes_is_set;
  int64_t pool_bytes;
  bool pool_bytes_is_set;
  int64_t peak_pool_bytes;
  bool peak_pool_bytes_is_set;
  int64_t peak_allocated_bytes;  // 0.113
  bool peak_allocated_bytes_is_set;
} PJRT_Device_MemoryStats_Args;
typedef struct { TPR_PJRT_ARGS_HEAD; PJRT_Device* device; }
    PJRT_Device_ClearMemoryStats_Args;

typedef struct { TPR_PJRT_ARGS_HEAD; PJRT_Executable* executable; }
    PJRT_Executable_Destroy_Args;
typedef struct {
  TPR_PJRT_ARGS_HEAD;
  PJRT_Executable* executable;
  size_t num_outputs;  // out
} PJRT_Executable_NumOutputs_Args;
typedef struct {
  TPR_PJRT_ARGS_HEAD;
  const PJRT_Executable* executable;
  const char* serialized_bytes;  // out; backed by serialized_executable
  size_t serialized_bytes_size;  // out
  PJRT_SerializedExecutable* serialized_executable;                   // out
  void (*serialized_executable_deleter)(PJRT_SerializedExecutable*);  // out
} PJRT_Executable_Serialize_Args;

typedef struct { TPR_PJRT_ARGS_HEAD; PJRT_LoadedExecutable* executable; }
    PJRT_LoadedExecutable_Destroy_Args;
typedef struct {
  TPR_PJRT_ARGS_HEAD;
  PJRT_LoadedExecutable* loaded_executable;
  PJRT_Executable* executable;  // out; caller destroys
} PJRT_LoadedExecutable_GetExecutable_Args;

typedef struct {
  TPR_PJRT_ARGS_HEAD;
  void* send_callbacks;
  void* recv_callbacks;
  size_t num_send_ops;
  size_t num_recv_ops;
  int launch_id;
  const int64_t* non_donatable_input_indices;  // 0.39
  size_t num_non_donatable_input_indices;
  void* context;              // 0.64
  const char* call_location;  // 0.76
  size_t num_tasks;           // 0.78
  int* task_ids;
  int64_t* incarnation_ids;
  void* multi_slice_config;                           // 0.97
  bool use_major_to_minor_data_layout_for_callbacks;  // 0.108
  void* hlo_output_callbacks;                         // 0.112
  size_t num_hlo_output_callbacks;
} PJRT_ExecuteOptions;
typedef struct {
  TPR_PJRT_ARGS_HEAD;
  PJRT_LoadedExecutable* executable;
  PJRT_ExecuteOptions* options;
  PJRT_Buffer* const* const* argument_lists;  // [num_devices][num_args]
  size_t num_devices;
  size_t num_args;
  PJRT_Buffer** const* output_lists;    // [num_devices][num_outputs], out
  PJRT_Event** device_complete_events;  // [num_devices] or NULL, out
  PJRT_Device* execute_device;          // portable executables
} PJRT_LoadedExecutable_Execute_Args;

typedef struct {
  size_t struct_size;
  int32_t* computation_origin;  // note: no extension_start in this struct
  size_t computation_origin_size;
  void* multi_slice_config;
} PJRT_LoadOptions;
typedef struct {
  TPR_PJRT_ARGS_HEAD;
  PJRT_Client* client;
  const char* serialized_executable;
  size_t serialized_executable_size;
  PJRT_LoadedExecutable* loaded_executable;  // out
  const char* overridden_serialized_compile_options;  // 0.71; NULL
  size_t overridden_serialized_compile_options_size;
  PJRT_LoadOptions* load_options;  // 0.111; NULL
} PJRT_Executable_DeserializeAndLoad_Args;

typedef struct { TPR_PJRT_ARGS_HEAD; PJRT_Buffer* buffer; }
    PJRT_Buffer_Destroy_Args;

typedef enum {
  PJRT_Buffer_MemoryLayout_Type_Tiled = 0,
  PJRT_Buffer_MemoryLayout_Type_Strides = 1,
} PJRT_Buffer_MemoryLayout_Type;
typedef struct {
  TPR_PJRT_ARGS_HEAD;
  const int64_t* minor_to_major;
  size_t minor_to_major_size;
  const int64_t* tile_dims;
  const size_t* tile_dim_sizes;
  size_t num_tiles;
} PJRT_Buffer_MemoryLayout_Tiled;
typedef struct {
  TPR_PJRT_ARGS_HEAD;
  const int64_t* byte_strides;
  size_t num_byte_strides;
} PJRT_Buffer_MemoryLayout_Strides;
struct PJRT_Buffer_MemoryLayout {
  TPR_PJRT_ARGS_HEAD;
  union {
    PJRT_Buffer_MemoryLayout_Tiled tiled;
    PJRT_Buffer_MemoryLayout_Strides strides;
  };
  PJRT_Buffer_MemoryLayout_Type type;
};

typedef struct {
  TPR_PJRT_ARGS_HEAD;
  PJRT_Buffer* src;
  PJRT_Buffer_MemoryLayout* host_layout;  // NULL: the plugin's default
  void* dst;        // NULL: only report the size
  size_t dst_size;  // in/out
  PJRT_Event* event;  // out; caller destroys
} PJRT_Buffer_ToHostBuffer_Args;
typedef struct {
  TPR_PJRT_ARGS_HEAD;
  PJRT_Buffer* buffer;
  PJRT_Event* event;  // out
} PJRT_Buffer_ReadyEvent_Args;
typedef struct {
  TPR_PJRT_ARGS_HEAD;
  PJRT_Buffer* buffer;
  uintptr_t buffer_pointer;  // out; on CPU, host memory
} PJRT_Buffer_UnsafePointer_Args;

typedef struct {
  TPR_PJRT_ARGS_HEAD;
  PJRT_Executable* executable;
  PJRT_Buffer_Type* output_types;  // out; lives as long as |executable|
  size_t num_output_types;         // out
} PJRT_Executable_OutputElementTypes_Args;
typedef struct {
  TPR_PJRT_ARGS_HEAD;
  PJRT_Executable* executable;
  size_t num_outputs;       // out
  const int64_t* dims;      // out; all outputs' dims, concatenated
  const size_t* dim_sizes;  // out; rank of each output
} PJRT_Executable_OutputDimensions_Args;

#undef TPR_PJRT_ARGS_HEAD

//===--- the function table -----------------------------------------------===//

#define TPR_PJRT_FN(name) PJRT_Error* (*name)(PJRT_##name##_Args * args)

typedef struct PJRT_Api {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Api_Version pjrt_api_version;
  /*   0 */ void (*Error_Destroy)(PJRT_Error_Destroy_Args* args);
  /*   1 */ void (*Error_Message)(PJRT_Error_Message_Args* args);
  /*   2 */ TPR_PJRT_FN(Error_GetCode);
  /*   3 */ TPR_PJRT_FN(Plugin_Initialize);
  /*   4 */ TPR_PJRT_FN(Plugin_Attributes);
  /*   5 */ TPR_PJRT_FN(Event_Destroy);
  /*   6 */ TPR_PJRT_FN(Event_IsReady);
  /*   7 */ void* Event_Error;
  /*   8 */ TPR_PJRT_FN(Event_Await);
  /*   9 */ TPR_PJRT_FN(Event_OnReady);
  /*  10 */ TPR_PJRT_FN(Client_Create);
  /*  11 */ TPR_PJRT_FN(Client_Destroy);
  /*  12 */ PJRT_Error* (*Client_PlatformName)(PJRT_Client_String_Args* args);
  /*  13 */ void* Client_ProcessIndex;
  /*  14 */ PJRT_Error* (*Client_PlatformVersion)(PJRT_Client_String_Args* a);
  /*  15 */ void* Client_Devices;
  /*  16 */ TPR_PJRT_FN(Client_AddressableDevices);
  /*  17 */ void* Client_LookupDevice;
  /*  18 */ void* Client_LookupAddressableDevice;
  /*  19 */ void* Client_AddressableMemories;
  /*  20 */ TPR_PJRT_FN(Client_Compile);
  /*  21 */ void* Client_DefaultDeviceAssignment;
  /*  22 */ TPR_PJRT_FN(Client_BufferFromHostBuffer);
  /*  23 */ TPR_PJRT_FN(DeviceDescription_Id);
  /*  24 */ void* DeviceDescription_ProcessIndex;
  /*  25 */ void* DeviceDescription_Attributes;
  /*  26 */ TPR_PJRT_FN(DeviceDescription_Kind);
  /*  27 */ void* DeviceDescription_DebugString;
  /*  28 */ void* DeviceDescription_ToString;
  /*  29 */ TPR_PJRT_FN(Device_GetDescription);
  /*  30 */ void* Device_IsAddressable;
  /*  31 */ void* Device_LocalHardwareId;
  /*  32 */ void* Device_AddressableMemories;
  /*  33 */ void* Device_DefaultMemory;
  /*  34 */ TPR_PJRT_FN(Device_MemoryStats);
  /*  35 */ void* Memory_Id;
  /*  36 */ void* Memory_Kind;
  /*  37 */ void* Memory_DebugString;
  /*  38 */ void* Memory_ToString;
  /*  39 */ void* Memory_AddressableByDevices;
  /*  40 */ TPR_PJRT_FN(Executable_Destroy);
  /*  41 */ void* Executable_Name;
  /*  42 */ void* Executable_NumReplicas;
  /*  43 */ void* Executable_NumPartitions;
  /*  44 */ TPR_PJRT_FN(Executable_NumOutputs);
  /*  45 */ void* Executable_SizeOfGeneratedCodeInBytes;
  /*  46 */ void* Executable_GetCostAnalysis;
  /*  47 */ void* Executable_OutputMemoryKinds;
  /*  48 */ void* Executable_OptimizedProgram;
  /*  49 */ TPR_PJRT_FN(Executable_Serialize);
  /*  50 */ TPR_PJRT_FN(LoadedExecutable_Destroy);
  /*  51 */ TPR_PJRT_FN(LoadedExecutable_GetExecutable);
  /*  52 */ void* LoadedExecutable_AddressableDevices;
  /*  53 */ void* LoadedExecutable_Delete;
  /*  54 */ void* LoadedExecutable_IsDeleted;
  /*  55 */ TPR_PJRT_FN(LoadedExecutable_Execute);
  /*  56 */ TPR_PJRT_FN(Executable_DeserializeAndLoad);
  /*  57 */ void* LoadedExecutable_Fingerprint;
  /*  58 */ TPR_PJRT_FN(Buffer_Destroy);
  /*  59 */ void* Buffer_ElementType;
  /*  60 */ void* Buffer_Dimensions;
  /*  61 */ void* Buffer_UnpaddedDimensions;
  /*  62 */ void* Buffer_DynamicDimensionIndices;
  /*  63 */ void* Buffer_GetMemoryLayout;
  /*  64 */ void* Buffer_OnDeviceSizeInBytes;
  /*  65 */ void* Buffer_Device;
  /*  66 */ void* Buffer_Memory;
  /*  67 */ void* Buffer_Delete;
  /*  68 */ void* Buffer_IsDeleted;
  /*  69 */ void* Buffer_CopyToDevice;
  /*  70 */ TPR_PJRT_FN(Buffer_ToHostBuffer);
  /*  71 */ void* Buffer_IsOnCpu;
  /*  72 */ TPR_PJRT_FN(Buffer_ReadyEvent);
  /*  73 */ TPR_PJRT_FN(Buffer_UnsafePointer);
  /*  74 */ void* slots_74_to_89[89 - 74 + 1];  // external references,
                                               // streams, topology, Compile
  /*  90 */ TPR_PJRT_FN(Executable_OutputElementTypes);
  /*  91 */ TPR_PJRT_FN(Executable_OutputDimensions);
  /*  92 */ void* slots_92_to_134[134 - 92 + 1];  // later additions we skip
  /* 135 */ TPR_PJRT_FN(Device_ClearMemoryStats);  // 0.106
} PJRT_Api;

#undef TPR_PJRT_FN

// Offset of slot |i| of the function table.
#define TPR_PJRT_SLOT_OFFSET(i) \
  (offsetof(PJRT_Api, pjrt_api_version) + sizeof(PJRT_Api_Version) + \
   (size_t)(i) * sizeof(void*))
_Static_assert(offsetof(PJRT_Api, Error_Destroy) == TPR_PJRT_SLOT_OFFSET(0),
               "PJRT_Api header");
_Static_assert(offsetof(PJRT_Api, Buffer_ReadyEvent) ==
                   TPR_PJRT_SLOT_OFFSET(72), "PJRT_Api slot 72");
_Static_assert(offsetof(PJRT_Api, Buffer_UnsafePointer) ==
                   TPR_PJRT_SLOT_OFFSET(73), "PJRT_Api slot 73");
_Static_assert(offsetof(PJRT_Api, Executable_OutputElementTypes) ==
                   TPR_PJRT_SLOT_OFFSET(90), "PJRT_Api slot 90");
_Static_assert(offsetof(PJRT_Api, Device_ClearMemoryStats) ==
                   TPR_PJRT_SLOT_OFFSET(135), "PJRT_Api slot 135");
_Static_assert(sizeof(PJRT_NamedValue) == 56, "PJRT_NamedValue layout");

// True when the plugin's table is long enough to hold |field| and it is set.
#define TPR_PJRT_HAS(api, field)                                  \
  ((api)->struct_size >= offsetof(PJRT_Api, field) + sizeof(void*) && \
   (api)->field != NULL)

typedef const PJRT_Api* (*tpr_pjrt_get_api_fn_t)(void);

#endif  // TPR_RUNTIME_PJRT_ABI_H_
