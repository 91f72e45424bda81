export { ordersPerMinute, runOrdersPerMinute, type OrdersPerMinuteOptions } from './orders-per-minute.js';
